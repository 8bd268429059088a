package eval

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/calf-go/calf/agent"
)

// Observed is what one run of a case did.
type Observed struct {
	// Output is the final answer: its text, or the JSON of a structured
	// answer.
	Output string `json:"output"`
	// ToolCalls are the calls the run made, in order.
	ToolCalls []Call `json:"tool_calls,omitempty"`
	// CostUSD, Tokens and ModelCalls are what the run spent; Latency how
	// long it took.
	CostUSD    float64       `json:"cost_usd"`
	Tokens     int64         `json:"tokens"`
	ModelCalls int64         `json:"model_calls"`
	Latency    time.Duration `json:"latency_ns"`
}

// Call is a tool call a run made.
type Call struct {
	Tool string          `json:"tool"`
	Args json.RawMessage `json:"args,omitempty"`
}

// FromRunInfo returns what the agent's run info says the run did, with
// latency, the time the caller measured.
func FromRunInfo(info *agent.RunInfo, latency time.Duration) Observed {
	o := Observed{
		Output: outputText(info.Output), CostUSD: info.Cost.USD,
		Tokens: info.Usage.InputTokens + info.Usage.OutputTokens, ModelCalls: info.Usage.Requests, Latency: latency,
	}
	for _, c := range info.ToolCalls {
		o.ToolCalls = append(o.ToolCalls, Call{Tool: c.Name, Args: json.RawMessage(c.Arguments)})
	}
	return o
}

// outputText returns a recorded output's text: a JSON string's value,
// or the JSON of a structured output.
func outputText(out json.RawMessage) string {
	var s string
	if json.Unmarshal(out, &s) == nil {
		return s
	}
	return string(out)
}

// Result is how one run of a case scored.
type Result struct {
	Case string `json:"case"`
	// Pass reports that every check passed.
	Pass   bool    `json:"pass"`
	Checks []Check `json:"checks"`
}

// Failed returns the checks that failed.
func (r *Result) Failed() []Check {
	var out []Check
	for _, c := range r.Checks {
		if !c.Pass {
			out = append(out, c)
		}
	}
	return out
}

// Check is one expectation of a case, checked: Name says which
// ("answer.contains", "trajectory", "budget.max_tokens"), Detail what
// was found when it failed.
type Check struct {
	Name   string `json:"name"`
	Pass   bool   `json:"pass"`
	Detail string `json:"detail,omitempty"`
}

// Score checks the run o against the case c, which must come from a set
// that [Set.Check] accepted. Rubrics are not checked here: [Run] has a
// [Judge] check them.
func Score(c *Case, o Observed) Result {
	r := Result{Case: c.ID}
	add := func(name string, pass bool, format string, a ...any) {
		ch := Check{Name: name, Pass: pass}
		if !pass {
			ch.Detail = fmt.Sprintf(format, a...)
		}
		r.Checks = append(r.Checks, ch)
	}
	if e := c.Expect; e != nil {
		scoreAnswer(e, o.Output, add)
	}
	if t := c.Trajectory; t != nil {
		ok, why := matchTrajectory(t, o.ToolCalls)
		add("trajectory", ok, "%s", why)
	}
	if b := c.Budget; b != nil {
		if b.MaxCostUSD > 0 {
			add("budget.max_cost_usd", o.CostUSD <= b.MaxCostUSD, "cost $%.6f, over $%.6f", o.CostUSD, b.MaxCostUSD)
		}
		if b.MaxTokens > 0 {
			add("budget.max_tokens", o.Tokens <= b.MaxTokens, "%d tokens, over %d", o.Tokens, b.MaxTokens)
		}
		if b.MaxModelCalls > 0 {
			add("budget.max_model_calls", o.ModelCalls <= b.MaxModelCalls, "%d model calls, over %d", o.ModelCalls, b.MaxModelCalls)
		}
		if b.MaxLatency > 0 {
			add("budget.max_latency", o.Latency <= time.Duration(b.MaxLatency), "took %s, over %s", o.Latency, time.Duration(b.MaxLatency))
		}
	}
	r.Pass = true
	for _, ch := range r.Checks {
		r.Pass = r.Pass && ch.Pass
	}
	return r
}

func scoreAnswer(e *Expect, out string, add func(string, bool, string, ...any)) {
	fold := func(s string) string {
		if e.IgnoreCase {
			return strings.ToLower(s)
		}
		return s
	}
	if e.Equals != nil {
		want, got := strings.TrimSpace(*e.Equals), strings.TrimSpace(out)
		add("answer.equals", want == got || sameJSON(want, got), "the answer is %q, not %q", clip(got), clip(want))
	}
	for _, s := range e.Contains {
		add("answer.contains", strings.Contains(fold(out), fold(s)), "the answer does not contain %q: %q", s, clip(out))
	}
	for _, s := range e.NotContains {
		add("answer.not_contains", !strings.Contains(fold(out), fold(s)), "the answer contains %q: %q", s, clip(out))
	}
	if e.regex != nil {
		add("answer.regex", e.regex.MatchString(out), "the answer does not match %s: %q", e.Regex, clip(out))
	}
	if e.schema != nil {
		err := e.schema.Validate(json.RawMessage(out))
		add("answer.schema", err == nil, "%v", err)
	}
	if len(e.Fields) > 0 {
		var v any
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			add("answer.fields", false, "the answer is not JSON: %q", clip(out))
			return
		}
		for _, path := range slices.Sorted(maps.Keys(e.Fields)) {
			got, ok := lookup(v, path)
			want := e.Fields[path]
			switch {
			case !ok:
				add("answer.fields", false, "the answer has no field %s", path)
			default:
				add("answer.fields", sameValue(got, want), "field %s is %s, not %s", path, jsonText(got), jsonText(want))
			}
		}
	}
}

// matchTrajectory compares the calls made with t's, and says why they
// do not match.
func matchTrajectory(t *Trajectory, made []Call) (bool, string) {
	want := t.Calls
	describe := func() string {
		return "calls made: " + callList(made, func(c Call) (string, []byte) { return c.Tool, c.Args }) +
			"; expected (" + cmpMode(t.Mode) + "): " + callList(want, func(c ExpectedCall) (string, []byte) { return c.Tool, c.Args })
	}
	switch t.Mode {
	case "", TrajectoryExact:
		if len(made) != len(want) {
			return false, describe()
		}
		for i := range want {
			if !want[i].matches(made[i]) {
				return false, describe()
			}
		}
		return true, ""
	case TrajectoryInOrder:
		i := 0
		for _, m := range made {
			if i < len(want) && want[i].matches(m) {
				i++
			}
		}
		return i == len(want), describe()
	case TrajectoryAnyOrder:
		if len(made) != len(want) {
			return false, describe()
		}
		return coveredOnce(want, made), describe()
	case TrajectorySubset:
		for _, m := range made {
			found := false
			for _, w := range want {
				if w.matches(m) {
					found = true
					break
				}
			}
			if !found {
				return false, describe()
			}
		}
		return true, ""
	default: // TrajectorySuperset
		return coveredOnce(want, made), describe()
	}
}

// coveredOnce reports whether each expected call matches a distinct call
// made (a bipartite matching: an early greedy choice may not block a
// later expected call).
func coveredOnce(want []ExpectedCall, made []Call) bool {
	owner := make([]int, len(made)) // owner[j]: 1 + the expected call matched to made[j]
	var try func(i int, seen []bool) bool
	try = func(i int, seen []bool) bool {
		for j := range made {
			if seen[j] || !want[i].matches(made[j]) {
				continue
			}
			seen[j] = true
			if owner[j] == 0 || try(owner[j]-1, seen) {
				owner[j] = i + 1
				return true
			}
		}
		return false
	}
	for i := range want {
		if !try(i, make([]bool, len(made))) {
			return false
		}
	}
	return true
}

// matches reports whether the call made is the expected one.
func (w *ExpectedCall) matches(m Call) bool {
	if w.Tool != m.Tool {
		return false
	}
	if len(w.Args) == 0 {
		return true
	}
	var want, got any
	if json.Unmarshal(w.Args, &want) != nil || json.Unmarshal(m.Args, &got) != nil {
		return false
	}
	if w.ArgsMatch == "subset" {
		return subset(want, got)
	}
	return sameValue(want, got)
}

// subset reports whether every field of want is in got with the same
// value, recursively into objects; other values compare whole.
func subset(want, got any) bool {
	wm, ok := want.(map[string]any)
	if !ok {
		return sameValue(want, got)
	}
	gm, ok := got.(map[string]any)
	if !ok {
		return false
	}
	for k, wv := range wm {
		gv, ok := gm[k]
		if !ok || !subset(wv, gv) {
			return false
		}
	}
	return true
}

// sameValue compares two JSON values (as decoded by encoding/json, or
// given in a set: numbers of any Go type compare by value).
func sameValue(a, b any) bool {
	if x, ok := number(a); ok {
		y, ok := number(b)
		return ok && x == y
	}
	return reflect.DeepEqual(normalize(a), normalize(b))
}

// normalize makes numbers of any Go type float64, in maps and slices.
func normalize(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			out[k] = normalize(x)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = normalize(x)
		}
		return out
	}
	if f, ok := number(v); ok {
		return f
	}
	return v
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case float32:
		return float64(n), true
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	case uint64:
		return float64(n), true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
}

func sameJSON(a, b string) bool {
	var x, y any
	return json.Unmarshal([]byte(a), &x) == nil && json.Unmarshal([]byte(b), &y) == nil && sameValue(x, y)
}

// lookup returns the value at path in v: object keys and array indexes
// separated by dots.
func lookup(v any, path string) (any, bool) {
	for _, part := range strings.Split(path, ".") {
		switch t := v.(type) {
		case map[string]any:
			x, ok := t[part]
			if !ok {
				return nil, false
			}
			v = x
		case []any:
			i, err := strconv.Atoi(part)
			if err != nil || i < 0 || i >= len(t) {
				return nil, false
			}
			v = t[i]
		default:
			return nil, false
		}
	}
	return v, true
}

func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// callList lists calls as "tool{args}, ..." ("none" for no call).
func callList[C any](cs []C, tool func(C) (string, []byte)) string {
	if len(cs) == 0 {
		return "none"
	}
	var b bytes.Buffer
	for i, c := range cs {
		if i > 0 {
			b.WriteString(", ")
		}
		name, args := tool(c)
		b.WriteString(name)
		if len(args) > 0 {
			b.WriteString(clip(string(args)))
		}
	}
	return b.String()
}

func cmpMode(m string) string {
	if m == "" {
		return TrajectoryExact
	}
	return m
}

// clip shortens s for a message.
func clip(s string) string {
	const n = 200
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// PassAtK is the chance that at least one of k runs of a case passes,
// estimated from n runs of which c passed: 1 - C(n-c, k) / C(n, k), the
// unbiased estimator of pass@k. It is 0 for k < 1 or k > n.
func PassAtK(n, c, k int) float64 {
	if k < 1 || k > n || c < 0 || c > n {
		return 0
	}
	if n-c < k {
		return 1
	}
	return 1 - ratio(n-c, n, k)
}

// PassHatK is the chance that all of k runs of a case pass, estimated
// from n runs of which c passed: C(c, k) / C(n, k) (pass^k). It is 0 for
// k < 1 or k > n.
func PassHatK(n, c, k int) float64 {
	if k < 1 || k > n || c < 0 || c > n || c < k {
		return 0
	}
	return ratio(c, n, k)
}

// ratio returns C(a, k) / C(b, k) for k <= a <= b, as a product of k
// factors (a-i)/(b-i), which stays exact enough where the binomials
// would overflow.
func ratio(a, b, k int) float64 {
	r := 1.0
	for i := range k {
		r *= float64(a-i) / float64(b-i)
	}
	return math.Max(0, math.Min(1, r))
}
