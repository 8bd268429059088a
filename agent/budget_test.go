package agent_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/agent/session"
	"github.com/calf-go/calf/internal/testwait"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/tool"
)

// priced marks a response as gpt-4o-mini's, with 1,000 input and 100
// output tokens: $0.00021 at the default prices.
func priced(r *model.Response) *model.Response {
	r.Model = "gpt-4o-mini"
	r.Usage = model.Usage{Requests: 1, InputTokens: 1000, OutputTokens: 100, TotalTokens: 1100}
	return r
}

const callCost = (1000*0.15 + 100*0.60) / 1e6

// looper serves an agent that calls tick until it has seen n results, then
// answers; it counts its model calls.
func looper(t *testing.T, e *env, name string, n int, opts *agent.Options) (*agent.Agent[string], *atomic.Int64) {
	t.Helper()
	var calls atomic.Int64
	tick := tool.Must(tool.New("tick", "Tick.", func(context.Context, struct{}) (string, error) { return "tock", nil }))
	o := agent.Options{}
	if opts != nil {
		o = *opts
	}
	o.Tools, o.MaxTurns = []tool.Tool{tick}, 100
	a := serve(t, e, agent.Must(agent.New(name, counted(&calls, func(_ context.Context, req *model.Request) (*model.Response, error) {
		results := 0 // since the last prompt
		for _, m := range req.Messages {
			switch m.Role {
			case model.RoleTool:
				results++
			case model.RoleUser:
				results = 0
			}
		}
		if results >= n {
			return priced(modeltest.Text(fmt.Sprintf("ticked %d times", results))), nil
		}
		return priced(modeltest.ToolCalls(modeltest.Call("", "tick", `{}`))), nil
	}), &o)))
	return a, &calls
}

func waitPaused(t *testing.T, e *env, id string) *agent.RunState {
	t.Helper()
	var st *agent.RunState
	testwait.ForErr(t, 10*time.Second, "run "+id+" to pause", func() (err error) {
		if st, err = e.rt.LoadState(t.Context(), id); err == nil && !st.Paused() {
			err = fmt.Errorf("run %+v", st)
		}
		return err
	})
	return st
}

// A budget stops a looping agent before the model call that would pass
// it (counted at the model); the run pauses with an event that says why,
// and raising the budget lets it finish.
func TestBudgetPausesALoopingAgent(t *testing.T) {
	e := newEnv(t, nil)
	a, calls := looper(t, e, "ticker", 6, nil)
	var pause *agent.PauseEvent
	done := make(chan *agent.Output[string], 1)
	go func() {
		for ev, err := range a.RunStream(runCtx(t), e.rt, "tick", &agent.RunOptions{RunID: "b1", Budget: &agent.Budget{MaxModelCalls: 3}}) {
			if err != nil {
				t.Error(err)
				break
			}
			if ev.Kind == agent.EventPause && ev.Pause.Paused {
				pause = ev.Pause
			}
		}
		out, err := a.Wait(t.Context(), e.rt, "b1")
		if err != nil {
			t.Error(err)
		}
		done <- out
	}()
	st := waitPaused(t, e, "b1")
	e.settle(t)
	if calls.Load() != 3 || st.Pause.Budget == nil || st.Pause.Budget.Scope != "run" || !strings.Contains(st.Pause.Reason, "3 model calls of 3") {
		t.Fatalf("%d model calls; paused: %+v", calls.Load(), st.Pause)
	}
	if st.Usage.Requests != 3 || math.Abs(st.Cost.USD-3*callCost) > 1e-12 {
		t.Errorf("spent when paused: %+v, %+v", st.Usage, st.Cost)
	}
	// A budget still too small keeps it paused.
	if _, err := e.rt.SetBudget(t.Context(), agent.RunRef{Name: "ticker", RunID: "b1"}, &agent.Budget{MaxModelCalls: 3, MaxCostUSD: 1}); err != nil {
		t.Fatal(err)
	}
	waitPaused(t, e, "b1")
	e.settle(t)
	if calls.Load() != 3 {
		t.Fatalf("%d model calls under the same budget", calls.Load())
	}
	if _, err := e.rt.SetBudget(t.Context(), agent.RunRef{Name: "ticker", RunID: "b1"}, &agent.Budget{MaxModelCalls: 10}); err != nil {
		t.Fatal(err)
	}
	out := <-done
	if out == nil || out.Output != "ticked 6 times" || calls.Load() != 7 || out.Usage.Requests != 7 || math.Abs(out.Cost.USD-7*callCost) > 1e-12 {
		t.Fatalf("output %+v; %d model calls", out, calls.Load())
	}
	if pause == nil || pause.Budget == nil || pause.Budget.Spent.Usage.Requests != 3 {
		t.Errorf("pause event in the stream: %+v", pause)
	}
	if _, err := e.rt.SetBudget(t.Context(), agent.RunRef{Name: "ticker", RunID: "b1"}, &agent.Budget{MaxModelCalls: -2}); err == nil {
		t.Error("a negative budget was taken")
	}
}

// With Fail, a budget ends the run failed instead; bounds on tokens and
// cost stop it before the call whose input would pass them.
func TestBudgetFailsAndOtherBounds(t *testing.T) {
	e := newEnv(t, nil)
	a, calls := looper(t, e, "ticker", 6, &agent.Options{Budget: &agent.Budget{MaxModelCalls: 2, Fail: true}})
	_, err := a.Run(runCtx(t), e.rt, "tick", nil)
	if !errors.Is(err, agent.ErrRunFailed) || !strings.Contains(err.Error(), "the run's budget is reached: 2 model calls of 2") || calls.Load() != 2 {
		t.Fatalf("failing budget: %v; %d model calls", err, calls.Load())
	}
	calls.Store(0)
	// Tokens: 1,100 a call (the next call's input estimated at some 65):
	// after three calls, the fourth would pass 3,000.
	_, err = a.Run(runCtx(t), e.rt, "tick", &agent.RunOptions{Budget: &agent.Budget{MaxTokens: 3000, Fail: true}})
	if err == nil || !strings.Contains(err.Error(), "3300 tokens") || calls.Load() != 3 {
		t.Errorf("token budget: %v; %d model calls", err, calls.Load())
	}
	calls.Store(0)
	_, err = a.Run(runCtx(t), e.rt, "tick", &agent.RunOptions{Budget: &agent.Budget{MaxCostUSD: 2.5 * callCost, Fail: true}})
	if err == nil || !strings.Contains(err.Error(), "$0.0006") || calls.Load() != 3 {
		t.Errorf("cost budget: %v; %d model calls", err, calls.Load())
	}
}

// A session's budget counts all its runs: the second run pauses when the
// session's total would pass it, and raising the session's budget lets it
// finish.
func TestSessionBudget(t *testing.T) {
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
	st := waitPaused(t, e, id)
	if calls.Load() != 3 || st.Pause.Budget.Scope != "session" {
		t.Fatalf("%d model calls; pause %+v", calls.Load(), st.Pause)
	}
	info, err := session.LoadInfo(t.Context(), e.rt.Store(), "s")
	if err != nil || info.Usage.Requests != 2 || info.Budget == nil || math.Abs(info.Cost.USD-2*callCost) > 1e-12 {
		t.Errorf("session: %+v, %v", info, err)
	}
	if err := e.rt.SetSessionBudget(t.Context(), "s", &agent.Budget{MaxModelCalls: 10}); err != nil {
		t.Fatal(err)
	}
	e.settle(t)
	out, err := a.Wait(t.Context(), e.rt, id)
	if err != nil || out.Output != "ticked 1 times" || calls.Load() != 4 {
		t.Fatalf("after raising the session's budget: %+v, %v; %d model calls", out, err, calls.Load())
	}
	if info, _ := session.LoadInfo(t.Context(), e.rt.Store(), "s"); info.Usage.Requests != 4 {
		t.Errorf("session usage %+v", info.Usage)
	}
}

// A subagent's usage and cost count as its parent's, and its budget is
// what the parent has left.
func TestSubagentUsageRollsUp(t *testing.T) {
	e := newEnv(t, nil)
	helper, helperCalls := looper(t, e, "helper", 2, nil) // three calls
	lead := serve(t, e, agent.Must(agent.New("lead", modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
		if last := req.Messages[len(req.Messages)-1]; last.Role == model.RoleTool {
			return priced(modeltest.Text("lead: " + last.Text())), nil
		}
		return priced(modeltest.ToolCalls(modeltest.Call("h1", "helper", `{"input":"tick twice"}`))), nil
	}), &agent.Options{Tools: []tool.Tool{tool.Must(agent.AsTool(helper, nil))}})))
	out, err := lead.Run(runCtx(t), e.rt, "go", nil)
	if err != nil || out.Output != "lead: ticked 2 times" {
		t.Fatal(out, err)
	}
	if out.Usage.Requests != 5 || math.Abs(out.Cost.USD-5*callCost) > 1e-12 || helperCalls.Load() != 3 {
		t.Errorf("usage %+v, cost %+v; want 5 calls, the helper's 3 included", out.Usage, out.Cost)
	}
	// A budget of 3 calls: the lead's first call leaves the helper 2,
	// and the helper, which needs 3, pauses.
	helperCalls.Store(0)
	id, err := lead.Submit(t.Context(), e.rt, "go", &agent.RunOptions{Budget: &agent.Budget{MaxModelCalls: 3}})
	if err != nil {
		t.Fatal(err)
	}
	child := waitPaused(t, e, agent.SubagentRunID(id, "h1"))
	if helperCalls.Load() != 2 || child.Budget == nil || child.Budget.MaxModelCalls != 2 {
		t.Errorf("the helper paused after %d calls with budget %+v", helperCalls.Load(), child.Budget)
	}
}

// Unpriced models are reported, never guessed.
func TestUnpricedModel(t *testing.T) {
	e := newEnv(t, nil)
	a := serve(t, e, agent.Must(agent.New("local", modeltest.FunctionModel(func(context.Context, *model.Request) (*model.Response, error) {
		r := modeltest.Text("hi")
		r.Model = "llama3.2"
		return r, nil
	}), nil)))
	out, err := a.Run(runCtx(t), e.rt, "hi", nil)
	if err != nil || out.Cost.USD != 0 || len(out.Cost.Unpriced) != 1 || out.Cost.Unpriced[0] != "llama3.2" {
		t.Errorf("%+v, %v", out.Cost, err)
	}
}
