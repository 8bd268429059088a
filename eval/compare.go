package eval

import (
	"encoding/json"
	"fmt"
	"io"
	"time"
)

// ReadReport reads a report written as JSON (encoding/json of a
// [Report]), such as a stored baseline.
func ReadReport(r io.Reader) (*Report, error) {
	var rep Report
	if err := json.NewDecoder(r).Decode(&rep); err != nil {
		return nil, fmt.Errorf("eval: read a report: %w", err)
	}
	return &rep, nil
}

// The changes of a case between two reports.
const (
	Better = "better" // a larger share of its runs passed
	Worse  = "worse"  // a smaller share passed: a regression
	Same   = "same"
	Added  = "added"   // in the new report only
	Gone   = "removed" // in the baseline only
)

// Comparison is how a report compares with a baseline, case by case.
type Comparison struct {
	Cases []CaseChange `json:"cases"`
	// Better and Worse count the cases that changed so.
	Better int `json:"better"`
	Worse  int `json:"worse"`
}

// Regressed reports whether a case got worse.
func (c *Comparison) Regressed() bool { return c.Worse > 0 }

// CaseChange is how one case changed: the share of its runs that
// passed, and the mean cost and latency of its runs, before and after.
type CaseChange struct {
	Case   string `json:"case"`
	Change string `json:"change"`
	// PassRate is the share of the runs that passed (0 to 1).
	BeforePassRate float64 `json:"before_pass_rate"`
	AfterPassRate  float64 `json:"after_pass_rate"`
	// CostDelta and LatencyDelta are the change of the mean per run.
	CostDelta    float64       `json:"cost_delta_usd"`
	LatencyDelta time.Duration `json:"latency_delta_ns"`
	TokensDelta  float64       `json:"tokens_delta"`
}

// Compare compares cur with the baseline base, case by case (by id): a
// case whose share of passing runs fell is worse, one whose share rose
// better. Cases of only one of them are listed as added or removed, and
// change neither count.
func Compare(base, cur *Report) *Comparison {
	before := map[string]*CaseReport{}
	for i := range base.Cases {
		before[base.Cases[i].Case] = &base.Cases[i]
	}
	seen := map[string]bool{}
	cmp := &Comparison{}
	for i := range cur.Cases {
		a := &cur.Cases[i]
		seen[a.Case] = true
		b, ok := before[a.Case]
		if !ok {
			cmp.Cases = append(cmp.Cases, CaseChange{Case: a.Case, Change: Added, AfterPassRate: a.passRate()})
			continue
		}
		ch := CaseChange{Case: a.Case, BeforePassRate: b.passRate(), AfterPassRate: a.passRate()}
		bc, bl, bt := b.means()
		ac, al, at := a.means()
		ch.CostDelta, ch.LatencyDelta, ch.TokensDelta = ac-bc, al-bl, at-bt
		switch {
		case ch.AfterPassRate < ch.BeforePassRate:
			ch.Change = Worse
			cmp.Worse++
		case ch.AfterPassRate > ch.BeforePassRate:
			ch.Change = Better
			cmp.Better++
		default:
			ch.Change = Same
		}
		cmp.Cases = append(cmp.Cases, ch)
	}
	for i := range base.Cases {
		if b := &base.Cases[i]; !seen[b.Case] {
			cmp.Cases = append(cmp.Cases, CaseChange{Case: b.Case, Change: Gone, BeforePassRate: b.passRate()})
		}
	}
	return cmp
}

func (c *CaseReport) passRate() float64 {
	if len(c.Runs) == 0 {
		return 0
	}
	return float64(c.Passed) / float64(len(c.Runs))
}

// means returns the mean cost, latency and tokens of the case's runs.
func (c *CaseReport) means() (cost float64, latency time.Duration, tokens float64) {
	if len(c.Runs) == 0 {
		return 0, 0, 0
	}
	for _, r := range c.Runs {
		cost += r.Observed.CostUSD
		latency += r.Observed.Latency
		tokens += float64(r.Observed.Tokens)
	}
	n := len(c.Runs)
	return cost / float64(n), latency / time.Duration(n), tokens / float64(n)
}
