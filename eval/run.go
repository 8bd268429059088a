package eval

import (
	"cmp"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/runner"
)

// RunOptions configure [Run]. A nil *RunOptions means the defaults.
type RunOptions struct {
	// ID names this run of the set; each case's run is "{ID}-{case}-{n}",
	// so that running the set again under the same ID (after the caller
	// stopped) starts no run twice and takes the outcomes of those that
	// ran. Default: a fresh id.
	ID string
	// Concurrency is how many case runs are in progress at once; the
	// runtime's broker spreads them over the processes that serve the
	// runner. Default: 8.
	Concurrency int
	// Tags, when set, selects the cases that have at least one of them.
	Tags []string
	// CaseTimeout bounds one run of a case (the run is cancelled after
	// it, and fails the case). Default: 5 minutes.
	CaseTimeout time.Duration
	// Progress, when set, is called as each run of a case ends, from any
	// goroutine, one call at a time, with how many runs have ended and
	// how many the set has.
	Progress func(r CaseRun, done, total int)
	// Judge judges the answers of the cases that have rubrics (see
	// [ModelJudge]); without one, such cases fail, saying so.
	Judge Judge
}

// Report is what running a set gave.
type Report struct {
	Set string `json:"set"`
	ID  string `json:"id"`
	// Cases are the cases run, in the set's order.
	Cases   []CaseReport  `json:"cases"`
	Elapsed time.Duration `json:"elapsed_ns"`
}

// CaseReport is how one case did over its repeats.
type CaseReport struct {
	Case string `json:"case"`
	// Runs are its runs, in order; Passed how many passed.
	Runs   []CaseRun `json:"runs"`
	Passed int       `json:"passed"`
	// Pass reports that every run passed.
	Pass bool `json:"pass"`
}

// PassAtK is the case's [PassAtK] over its runs.
func (c *CaseReport) PassAtK(k int) float64 { return PassAtK(len(c.Runs), c.Passed, k) }

// PassHatK is the case's [PassHatK] over its runs.
func (c *CaseReport) PassHatK(k int) float64 { return PassHatK(len(c.Runs), c.Passed, k) }

// CaseRun is one run of a case: the run, what it did, how it scored.
type CaseRun struct {
	Case  string `json:"case"`
	N     int    `json:"n"`
	RunID string `json:"run_id"`
	// Status is the run's; Error why it failed, or why it could not run.
	Status   string   `json:"status"`
	Error    string   `json:"error,omitempty"`
	Observed Observed `json:"observed"`
	Result   Result   `json:"result"`
	// Verdicts are the judge's, on the case's rubrics.
	Verdicts []Verdict `json:"verdicts,omitempty"`
}

// Passed returns how many cases passed (every run of them).
func (r *Report) Passed() int {
	n := 0
	for _, c := range r.Cases {
		if c.Pass {
			n++
		}
	}
	return n
}

// Run runs every case of s (Repeats times each) as runs of r on rt, and
// scores them. A case run whose run fails, is cancelled or cannot start
// fails, with the reason in its [CaseRun.Error]. Run returns ctx's error
// if ctx ends first, with the report of the runs that ended. The cases'
// runs are ordinary runs of the runner: any process that serves it takes
// them, so a set fans out over the workers of the runtime's broker.
func Run(ctx context.Context, rt *agent.Runtime, r runner.Runner, s *Set, opts *RunOptions) (*Report, error) {
	var o RunOptions
	if opts != nil {
		o = *opts
	}
	if o.ID == "" {
		o.ID = "eval-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	}
	o.Concurrency = max(cmp.Or(o.Concurrency, 8), 1)
	o.CaseTimeout = cmp.Or(o.CaseTimeout, 5*time.Minute)
	if err := s.Check(); err != nil {
		return nil, err
	}
	began := time.Now()
	rep := &Report{Set: s.Name, ID: o.ID}
	type job struct {
		c    *Case
		i, n int // the case's place in the report, the run's among its repeats
	}
	var jobs []job
	var runs [][]CaseRun
	for i := range s.Cases {
		c := &s.Cases[i]
		if len(o.Tags) > 0 && !slices.ContainsFunc(c.Tags, func(t string) bool { return slices.Contains(o.Tags, t) }) {
			continue
		}
		rep.Cases = append(rep.Cases, CaseReport{Case: c.ID})
		runs = append(runs, make([]CaseRun, max(c.Repeats, 1)))
		for n := range max(c.Repeats, 1) {
			jobs = append(jobs, job{c, len(rep.Cases) - 1, n})
		}
	}
	var mu sync.Mutex
	done := 0
	var wg sync.WaitGroup
	sem := make(chan struct{}, o.Concurrency)
	for _, j := range jobs {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			cr := runCase(ctx, rt, r, j.c, o, j.n)
			mu.Lock()
			defer mu.Unlock()
			runs[j.i][j.n] = cr
			done++
			if o.Progress != nil {
				o.Progress(cr, done, len(jobs))
			}
		})
	}
	wg.Wait()
	for i := range rep.Cases {
		cr := &rep.Cases[i]
		cr.Runs = runs[i]
		cr.Pass = true
		for _, run := range cr.Runs {
			if run.Result.Pass {
				cr.Passed++
			}
			cr.Pass = cr.Pass && run.Result.Pass
		}
	}
	rep.Elapsed = time.Since(began)
	return rep, ctx.Err()
}

// runCase runs case c once (its n-th run) and scores it.
func runCase(ctx context.Context, rt *agent.Runtime, r runner.Runner, c *Case, o RunOptions, n int) CaseRun {
	cr := CaseRun{Case: c.ID, N: n, RunID: o.ID + "-" + c.ID + "-" + strconv.Itoa(n)}
	ropts := &runner.Options{RunID: cr.RunID}
	for _, m := range c.History {
		if m.Role == "assistant" {
			ropts.Thread = append(ropts.Thread, model.AssistantMessage(m.Content))
		} else {
			ropts.Thread = append(ropts.Thread, model.UserMessage(m.Content))
		}
	}
	cctx, cancel := context.WithTimeout(ctx, o.CaseTimeout)
	defer cancel()
	began := time.Now()
	res, err := r.Run(cctx, rt, c.Input, ropts, nil)
	latency := time.Since(began)
	fail := func(why string) CaseRun {
		cr.Error = why
		cr.Result = Result{Case: c.ID, Checks: []Check{{Name: "run", Detail: why}}}
		return cr
	}
	switch {
	case err != nil && errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		cr.Status = string(runner.Cancelled)
		return fail(fmt.Sprintf("the run took over %s", o.CaseTimeout))
	case err != nil:
		cr.Status = "not started"
		return fail(err.Error())
	}
	cr.Status = string(res.Status)
	if res.Status != runner.Complete {
		return fail(fmt.Sprintf("the run is %s: %s", res.Status, res.Error))
	}
	cr.Observed = Observed{Output: res.Text, ModelCalls: res.Usage.Requests, Tokens: res.Usage.InputTokens + res.Usage.OutputTokens, Latency: latency}
	if runner.KindOf(r) == runner.KindAgent {
		// An agent's run also says which tools it called and what it
		// cost.
		v, err := rt.LoadRun(ctx, agent.RunRef{Kind: "agent", Name: r.Name(), RunID: res.RunID})
		if info, ok := v.(*agent.RunInfo); err == nil && ok {
			cr.Observed = FromRunInfo(info, latency)
			cr.Observed.Output = res.Text
		}
	}
	cr.Result = Score(c, cr.Observed)
	cr.Verdicts = judge(ctx, o.Judge, c, cr.Observed.Output, &cr.Result)
	return cr
}

// WriteJUnit writes rep as JUnit XML: a test suite of the set, a test
// case per case, failed with every check that failed in any of its runs.
func (rep *Report) WriteJUnit(w io.Writer) error {
	type failure struct {
		Message string `xml:"message,attr"`
		Type    string `xml:"type,attr"`
		Text    string `xml:",chardata"`
	}
	type testCase struct {
		Name      string   `xml:"name,attr"`
		ClassName string   `xml:"classname,attr"`
		Time      string   `xml:"time,attr"`
		Failure   *failure `xml:"failure,omitempty"`
	}
	type suite struct {
		XMLName  xml.Name   `xml:"testsuite"`
		Name     string     `xml:"name,attr"`
		Tests    int        `xml:"tests,attr"`
		Failures int        `xml:"failures,attr"`
		Time     string     `xml:"time,attr"`
		Cases    []testCase `xml:"testcase"`
	}
	secs := func(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 3, 64) }
	st := suite{Name: rep.Set, Tests: len(rep.Cases), Time: secs(rep.Elapsed)}
	for _, c := range rep.Cases {
		var took time.Duration
		tc := testCase{Name: c.Case, ClassName: rep.Set}
		var text string
		failed := 0
		for _, run := range c.Runs {
			took += run.Observed.Latency
			for _, ch := range run.Result.Failed() {
				text += fmt.Sprintf("run %d (%s): %s: %s\n", run.N, run.RunID, ch.Name, ch.Detail)
			}
			if !run.Result.Pass {
				failed++
			}
		}
		tc.Time = secs(took)
		if !c.Pass {
			st.Failures++
			tc.Failure = &failure{Type: "eval", Message: fmt.Sprintf("%d of %d runs failed", failed, len(c.Runs)), Text: text}
		}
		st.Cases = append(st.Cases, tc)
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(st); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}
