package team_test

import (
	"errors"
	"testing"
	"time"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/team"
)

// waitAgentRun waits until the agent run id, read from the store, passes
// cond.
func waitAgentRun(t *testing.T, e *env, id string, cond func(*agent.RunInfo) bool) *agent.RunInfo {
	t.Helper()
	ctx := runCtx(t)
	for wait := time.Millisecond; ; wait = min(2*wait, 50*time.Millisecond) {
		if info, err := e.rt.LoadAgentRun(ctx, id); err == nil && cond(info) {
			return info
		} else if err != nil && !errors.Is(err, store.ErrNotFound) {
			t.Fatal(err)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("agent run %s: not as awaited in time", id)
		case <-time.After(wait):
		}
	}
}

// A team run's budget bounds its member runs together: the second member
// gets what the first left, none, and pauses before its model call until
// the budget is raised by name; then it goes on and the run completes.
func TestBudgetPausesMemberUntilRaised(t *testing.T) {
	e := newEnv(t, nil)
	a, b := wrapper(t, e, "a"), wrapper(t, e, "b")
	tm := serve(t, e, team.Must(team.NewSequential("crew", members(a, b), nil)))
	ctx := runCtx(t)
	if _, err := tm.Submit(ctx, e.rt, "x", &team.RunOptions{RunID: "t1", Budget: &agent.Budget{MaxModelCalls: -2}}); err == nil {
		t.Fatal("a negative budget was taken")
	}
	if _, err := tm.Submit(ctx, e.rt, "x", &team.RunOptions{RunID: "t1", Budget: &agent.Budget{MaxModelCalls: 1}}); err != nil {
		t.Fatal(err)
	}
	paused := waitAgentRun(t, e, "t1.2.b", func(r *agent.RunInfo) bool { return r.Paused })
	if paused.Pause == nil || paused.Pause.Budget == nil || paused.Budget == nil || paused.Budget.MaxModelCalls != -1 {
		t.Fatalf("member b paused with %+v, budget %+v; want a budget pause with none left", paused.Pause, paused.Budget)
	}
	first, err := e.rt.LoadAgentRun(ctx, "t1.1.a")
	if err != nil {
		t.Fatal(err)
	}
	if first.Budget == nil || *first.Budget != (agent.Budget{MaxModelCalls: 1}) {
		t.Errorf("member a started with budget %+v, want the team's", first.Budget)
	}
	if info, err := tm.LoadRun(ctx, e.rt, "t1"); err != nil || info.Budget == nil || info.Budget.MaxModelCalls != 1 {
		t.Fatalf("team run view: %+v, %v", info, err)
	}
	if b.calls.Load() != 0 {
		t.Fatalf("member b's model was called %d times past the budget", b.calls.Load())
	}

	v, err := e.rt.SetBudget(ctx, agent.RunRef{Kind: "team", Name: "crew", RunID: "t1"}, &agent.Budget{MaxModelCalls: 2})
	if err != nil {
		t.Fatalf("SetBudget: %v", err)
	}
	if info := v.(*team.RunInfo); info.Budget == nil || info.Budget.MaxModelCalls != 2 {
		t.Errorf("SetBudget's view has budget %+v", info.Budget)
	}
	out, err := tm.Wait(ctx, e.rt, "t1")
	if err != nil {
		t.Fatalf("Wait after the budget was raised: %v", err)
	}
	if out.Output != "b(a(x))" || out.Usage.Requests != 2 {
		t.Errorf("output %q after %d model calls", out.Output, out.Usage.Requests)
	}
	if second, err := e.rt.LoadAgentRun(ctx, "t1.2.b"); err != nil || second.Budget == nil || second.Budget.MaxModelCalls != 1 {
		t.Errorf("member b's budget after the raise: %+v (%v), want the 1 call left", second, err)
	}
	if _, err := e.rt.SetBudget(ctx, agent.RunRef{Kind: "team", Name: "crew", RunID: "t1"}, nil); !errors.Is(err, agent.ErrRunEnded) {
		t.Errorf("SetBudget of an ended run = %v, want ErrRunEnded", err)
	}
}

// A team run without a budget is given one by name while a member waits
// in its model call: the member run gets it at once.
func TestBudgetSetOnMemberInFlight(t *testing.T) {
	e := newEnv(t, nil)
	entered, release := make(chan struct{}), make(chan struct{})
	a := newAgent(t, e, "a", func(p string) (string, error) {
		close(entered)
		<-release
		return "done", nil
	})
	tm := serve(t, e, team.Must(team.NewSequential("crew", members(a), nil)))
	ctx := runCtx(t)
	if _, err := tm.Submit(ctx, e.rt, "x", &team.RunOptions{RunID: "t1"}); err != nil {
		t.Fatal(err)
	}
	<-entered
	_, err := e.rt.SetBudget(ctx, agent.RunRef{Kind: "team", RunID: "t1"}, &agent.Budget{MaxModelCalls: 3})
	close(release)
	if err != nil {
		t.Fatalf("SetBudget: %v", err)
	}
	if info, err := e.rt.LoadAgentRun(ctx, "t1.1.a"); err != nil || info.Budget == nil || info.Budget.MaxModelCalls != 3 {
		t.Errorf("member a's budget: %+v (%v)", info, err)
	}
	if _, err := tm.Wait(ctx, e.rt, "t1"); err != nil {
		t.Fatal(err)
	}
}
