package agent

import (
	"context"
	"fmt"
	"strings"

	"github.com/calf-go/calf/agent/compaction"
	"github.com/calf-go/calf/model"
)

// Budget bounds what a run spends: its model calls and those of every run
// it starts (subagents) or hands off to, counted before each model call.
// When the next call would pass a bound, the run pauses durably (see
// [Agent.Pause]) with a pause event that names the budget, and goes on
// once the budget is raised ([Runtime.SetBudget]) or is cancelled; with
// Fail set, it fails instead. The zero value of a bound means no bound,
// and -1 a bound used up (see [Budget.Remaining]): the run stops before
// its next model call.
type Budget struct {
	// MaxModelCalls bounds the model calls.
	MaxModelCalls int64 `json:"max_model_calls,omitempty"`
	// MaxTokens bounds the tokens (input and output), counting the
	// estimated input of the next call.
	MaxTokens int64 `json:"max_tokens,omitempty"`
	// MaxCostUSD bounds the cost, in US dollars, at the runtime's prices
	// ([RuntimeOptions.Prices]), counting the estimated input of the next
	// call. Calls of unpriced models count nothing toward it.
	MaxCostUSD float64 `json:"max_cost_usd,omitempty"`
	// Fail ends the run failed when the budget is reached, instead of
	// pausing it.
	Fail bool `json:"fail,omitempty"`
}

// Remaining returns what is left of b once spent is spent, for a run that
// b's run starts (a subagent's, a team member's, a workflow node's): each
// bound less what was spent, and a bound used up -1, which stops that run
// before its next model call.
func (b *Budget) Remaining(spent Spent) *Budget {
	r := *b
	if b.MaxModelCalls > 0 {
		r.MaxModelCalls = max(b.MaxModelCalls-spent.Usage.Requests, 0)
		if r.MaxModelCalls == 0 {
			r.MaxModelCalls = -1
		}
	}
	if b.MaxTokens > 0 {
		r.MaxTokens = max(b.MaxTokens-spent.Usage.TotalTokens, 0)
		if r.MaxTokens == 0 {
			r.MaxTokens = -1
		}
	}
	if b.MaxCostUSD > 0 {
		r.MaxCostUSD = max(b.MaxCostUSD-spent.Cost.USD, 0)
		if r.MaxCostUSD == 0 {
			r.MaxCostUSD = -1
		}
	}
	return &r
}

// Spent is what some runs spent.
type Spent struct {
	Usage model.Usage `json:"usage"`
	Cost  model.Cost  `json:"cost"`
}

// add returns the sum of s and t.
func (s Spent) add(t Spent) Spent {
	return Spent{Usage: s.Usage.Add(t.Usage), Cost: s.Cost.Add(t.Cost)}
}

// BudgetStop says which budget stopped a run, and what had been spent.
type BudgetStop struct {
	// Scope is "run" or "session".
	Scope  string `json:"scope"`
	Budget Budget `json:"budget"`
	Spent  Spent  `json:"spent"`
	// Reason says which bound the next call would pass.
	Reason string `json:"reason"`
	// Next is the estimate of what the next call counts before it is
	// made: one request, its input tokens and their cost.
	Next *Spent `json:"next,omitempty"`
}

// stops reports whether b, set on the run st that stop paused, still
// stops it before the model call it waits for: what the run has spent
// and the estimate of that call's input pass one of b's bounds. A stop
// recorded without an estimate counts the call alone.
func (stop *BudgetStop) stops(b *Budget, st *runState) bool {
	if b == nil {
		return false
	}
	spent := st.spent()
	if stop.Scope == "session" && st.SessionSpent != nil {
		spent = spent.add(*st.SessionSpent)
	}
	next := Spent{Usage: model.Usage{Requests: 1}}
	if stop.Next != nil {
		next = *stop.Next
	}
	return b.exceeded(spent, next.Usage, func(model.Usage) float64 { return next.Cost.USD }) != ""
}

// keepPaused records in the paused run st that b, which still stops it,
// is the budget it waits for: the run stays paused, with no event.
func (st *runState) keepPaused(b *Budget) {
	p := *st.Pause
	stop := *p.Budget
	stop.Budget = *b
	p.Budget = &stop
	st.Pause = &p
}

// Validate reports a budget whose bounds are negative, but for -1, the
// mark of a bound used up that [Budget.Remaining] gives.
func (b *Budget) Validate() error {
	if b.MaxModelCalls < -1 || b.MaxTokens < -1 || (b.MaxCostUSD < 0 && b.MaxCostUSD != -1) {
		return fmt.Errorf("a budget's bounds must not be negative (but for -1, a bound used up): %+v", *b)
	}
	return nil
}

// exceeded reports which bound of b the next model call would pass, with
// spent so far and next the estimate of the call's input.
func (b *Budget) exceeded(spent Spent, next model.Usage, price func(model.Usage) float64) string {
	var why []string
	// A bound of -1 (a subagent's share of a budget used up) stops at once.
	if b.MaxModelCalls != 0 && spent.Usage.Requests+1 > b.MaxModelCalls {
		why = append(why, fmt.Sprintf("%d model calls of %d", spent.Usage.Requests, b.MaxModelCalls))
	}
	if b.MaxTokens != 0 && spent.Usage.TotalTokens+next.InputTokens > b.MaxTokens {
		why = append(why, fmt.Sprintf("%d tokens and about %d more of %d", spent.Usage.TotalTokens, next.InputTokens, b.MaxTokens))
	}
	if b.MaxCostUSD != 0 && spent.Cost.USD+price(next) > b.MaxCostUSD {
		why = append(why, fmt.Sprintf("$%.4f and about $%.4f more of $%.4f", spent.Cost.USD, price(next), b.MaxCostUSD))
	}
	return strings.Join(why, "; ")
}

// spent returns what the run st and the runs before it in its handoff
// chain spent.
func (st *runState) spent() Spent {
	s := Spent{Usage: st.Usage, Cost: st.Cost}
	if st.Inherited != nil {
		s = s.add(*st.Inherited)
	}
	return s
}

// budgetStage is the inference stage of budgets: a model call that would
// pass the run's or its session's budget does not happen; the run pauses
// (or fails) before it. A run may be given a budget at any time
// ([Runtime.SetBudget]): the stage is on every agent's path, and costs a
// check of two pointers for a run without one.
func (h *handlers) budgetStage(ctx context.Context, inf *inference) (bool, error) {
	if stop := h.checkBudget(inf.st, inf.req); stop != nil {
		return true, h.budgetReached(ctx, inf.st, inf.version, stop)
	}
	return false, nil
}

// checkBudget reports the budget (the run's or its session's) that the
// model call req of the run st would pass, if any.
func (h *handlers) checkBudget(st *runState, req *model.Request) *BudgetStop {
	if st.Budget == nil && st.SessionBudget == nil {
		return nil
	}
	est := 0
	for _, m := range req.Messages {
		est += compaction.EstimateTokens(m)
	}
	next := model.Usage{Requests: 1, InputTokens: int64(est)}
	name := h.a.model.Name()
	price := func(u model.Usage) float64 {
		return h.rt.prices.CostOf(name, u).USD
	}
	estimate := &Spent{Usage: next, Cost: model.Cost{USD: price(next)}}
	spent := st.spent()
	if b := st.Budget; b != nil {
		if why := b.exceeded(spent, next, price); why != "" {
			return &BudgetStop{Scope: "run", Budget: *b, Spent: spent, Reason: why, Next: estimate}
		}
	}
	if b := st.SessionBudget; b != nil {
		total := spent
		if st.SessionSpent != nil {
			total = total.add(*st.SessionSpent)
		}
		if why := b.exceeded(total, next, price); why != "" {
			return &BudgetStop{Scope: "session", Budget: *b, Spent: total, Reason: why, Next: estimate}
		}
	}
	return nil
}

// budgetReached pauses the run st, or fails it if its budget says so,
// before the model call that would pass the budget stop.
func (h *handlers) budgetReached(ctx context.Context, st *runState, version int64, stop *BudgetStop) error {
	reason := fmt.Sprintf("the %s's budget is reached: %s", stop.Scope, stop.Reason)
	if stop.Budget.Fail {
		return h.fail(ctx, st.RunID, reason)
	}
	step := st.Step
	st, err := h.rt.runs.UpdateFrom(ctx, st, version, func(cur *runState) (bool, error) {
		if cur.Status.Terminal() || cur.Step != step || cur.Phase != phaseInference || cur.Paused() {
			return false, nil
		}
		cur.Pause = &PauseState{Reason: reason, RequestedAt: h.rt.now(), Step: step, PausedAt: h.rt.now(), Budget: stop}
		return true, nil
	})
	if err != nil || !st.Paused() {
		return err
	}
	return h.rt.emitPaused(ctx, st)
}

// SetBudget replaces the budget of the run that run names (nil: no
// budget), and returns the run as it stands. A run that a budget paused
// goes on at once if the new budget lets it; a run that the new budget
// still stops (what it spent and the estimated input of the model call it
// waits for pass a bound) stays paused, with no event, unless the budget
// has Fail set: the run then goes on to fail. A team's or a workflow's run
// does as its kind says (see [RunKind]).
func (rt *Runtime) SetBudget(ctx context.Context, run RunRef, b *Budget) (RunView, error) {
	if rt == nil {
		return nil, ErrNoRuntime
	}
	if k, err := rt.runKind(run, "set the budget"); k != nil || err != nil {
		if err != nil {
			return nil, err
		}
		return k.SetBudget(ctx, rt, run, b)
	}
	return agentView(rt.setAgentBudget(ctx, run, b))
}

func (rt *Runtime) setAgentBudget(ctx context.Context, run RunRef, b *Budget) (*RunInfo, error) {
	if err := run.agentRef("set the budget"); err != nil {
		return nil, err
	}
	agentName, runID := run.Name, run.RunID
	if b != nil {
		if err := b.Validate(); err != nil {
			return nil, fmt.Errorf("agent %s: set the budget of run %s: %w", agentName, runID, err)
		}
	}
	var resumed bool
	st, err := rt.updateChain(ctx, agentName, runID, nil, func(st *runState) (bool, error) {
		st.Budget = b
		resumed = st.Paused() && st.Pause.Budget != nil && st.Pause.Budget.Scope == "run"
		if resumed && st.Pause.Budget.stops(b, st) && !b.Fail {
			st.keepPaused(b)
			resumed = false
		}
		if resumed {
			st.Pause = nil
			st.CountResume()
		}
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("agent %s: set the budget of run %s: %w", agentName, runID, err)
	}
	if resumed {
		// The next model call checks the new budget, and pauses the run
		// again if it still stops it.
		if err := rt.emitResume(ctx, st); err != nil {
			d, _ := st.info()
			return d, fmt.Errorf("agent %s: set the budget of run %s: %w", agentName, runID, err)
		}
	}
	return st.info()
}
