package agent_test

import (
	"strings"
	"testing"

	"github.com/calf-go/calf/agent"
)

// pauseEvents returns the ids of the pause channel's messages of run id
// that reached the broker.
func (e *env) pauseEvents(id string) []string {
	ids, _ := e.eventIDs("calf.agent.*.pause")
	var out []string
	for _, m := range ids {
		if strings.HasPrefix(m, id+".") {
			out = append(out, m)
		}
	}
	return out
}

// A budget that a paused run still exceeds, set again or set anew, leaves
// the run paused with no resume and no new pause: no event, no model call.
func TestBudgetStillExceededLeavesRunPaused(t *testing.T) {
	for _, tt := range []struct {
		name  string
		first agent.Budget // the budget the run starts with
		again agent.Budget // the budget set on the paused run
		calls int64        // model calls before the pause
	}{
		{"the same model calls", agent.Budget{MaxModelCalls: 3}, agent.Budget{MaxModelCalls: 3}, 3},
		{"fewer model calls", agent.Budget{MaxModelCalls: 3}, agent.Budget{MaxModelCalls: 2}, 3},
		{"the same tokens", agent.Budget{MaxTokens: 3000}, agent.Budget{MaxTokens: 3000}, 3},
		// 3,300 tokens spent, and the next call's input estimated at some
		// 65: 3,350 is still too few.
		{"tokens short of the next call's input", agent.Budget{MaxTokens: 3000}, agent.Budget{MaxTokens: 3350}, 3},
		{"the same cost", agent.Budget{MaxCostUSD: 2.5 * callCost}, agent.Budget{MaxCostUSD: 2.5 * callCost}, 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nil)
			a, calls := looper(t, e, "ticker", 6, nil)
			id, err := a.Submit(t.Context(), e.rt, "tick", &agent.RunOptions{Budget: &tt.first})
			if err != nil {
				t.Fatal(err)
			}
			before := waitPaused(t, e, id)
			e.settle(t)
			events := e.pauseEvents(id)
			if calls.Load() != tt.calls || len(events) != 1 {
				t.Fatalf("paused after %d model calls with pause events %v", calls.Load(), events)
			}
			info, err := agentInfo(e.rt.SetBudget(t.Context(), agent.RunRef{Name: "ticker", RunID: id}, &tt.again))
			if err != nil {
				t.Fatal(err)
			}
			st, err := e.rt.LoadState(t.Context(), id)
			if err != nil {
				t.Fatal(err)
			}
			if !info.Paused || !st.Paused() || st.Resumes != before.Resumes || info.Budget == nil || *info.Budget != tt.again {
				t.Errorf("after SetBudget: paused %v, resumes %d (was %d), budget %+v", info.Paused, st.Resumes, before.Resumes, info.Budget)
			}
			e.settle(t)
			if got := e.pauseEvents(id); len(got) != 1 || calls.Load() != tt.calls {
				t.Errorf("after SetBudget: pause events %v, %d model calls", got, calls.Load())
			}
			if st, err := e.rt.LoadState(t.Context(), id); err != nil || !st.Paused() {
				t.Errorf("after SetBudget: %+v, %v", st, err)
			}
			// A budget that lets it go on still resumes it.
			if _, err := e.rt.SetBudget(t.Context(), agent.RunRef{Name: "ticker", RunID: id}, nil); err != nil {
				t.Fatal(err)
			}
			e.settle(t)
			out, err := a.Wait(runCtx(t), e.rt, id)
			if err != nil || out.Output != "ticked 6 times" {
				t.Fatalf("after the budget was lifted: %+v, %v", out, err)
			}
		})
	}
}

// The same for a session's budget: setting it again on a session whose
// run it paused leaves the run paused with no event.
func TestSessionBudgetStillExceededLeavesRunPaused(t *testing.T) {
	e := newEnv(t, nil)
	a, calls := looper(t, e, "ticker", 1, nil) // two model calls a run
	if err := e.rt.SetSessionBudget(t.Context(), "s", &agent.Budget{MaxModelCalls: 3}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Run(runCtx(t), e.rt, "tick", &agent.RunOptions{SessionID: "s"}); err != nil {
		t.Fatal(err)
	}
	id, err := a.Submit(t.Context(), e.rt, "tick again", &agent.RunOptions{SessionID: "s"})
	if err != nil {
		t.Fatal(err)
	}
	waitPaused(t, e, id)
	e.settle(t)
	if got := e.pauseEvents(id); len(got) != 1 || calls.Load() != 3 {
		t.Fatalf("paused after %d model calls with pause events %v", calls.Load(), got)
	}
	if err := e.rt.SetSessionBudget(t.Context(), "s", &agent.Budget{MaxModelCalls: 3}); err != nil {
		t.Fatal(err)
	}
	e.settle(t)
	if got := e.pauseEvents(id); len(got) != 1 || calls.Load() != 3 {
		t.Errorf("after the same session budget: pause events %v, %d model calls", got, calls.Load())
	}
	if st, err := e.rt.LoadState(t.Context(), id); err != nil || !st.Paused() {
		t.Errorf("after the same session budget: %+v, %v", st, err)
	}
}
