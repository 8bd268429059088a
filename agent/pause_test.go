package agent_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/agent/session"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/tool"
)

// A pause asked for during a tool call lets the step finish, then holds
// the run before its next model call; a resume from another runtime lets
// it finish. RunStream shows both.
func TestPauseAndResume(t *testing.T) {
	e := newEnv(t, nil)
	inTool, release := make(chan struct{}), make(chan struct{})
	slow := tool.Must(tool.New("slow", "Work slowly.", func(ctx context.Context, _ struct{}) (string, error) {
		close(inTool)
		<-release
		return "worked", nil
	}))
	var calls atomic.Int64
	a := serve(t, e, agent.Must(agent.New("worker", counted(&calls, func(_ context.Context, req *model.Request) (*model.Response, error) {
		if last := req.Messages[len(req.Messages)-1]; last.Role == model.RoleTool {
			return modeltest.Text("done: " + last.Text()), nil
		}
		return modeltest.ToolCalls(modeltest.Call("s1", "slow", `{}`)), nil
	}), &agent.Options{Tools: []tool.Tool{slow}})))

	type item struct {
		kind string
		ev   agent.Event
	}
	events := make(chan item, 64)
	go func() {
		defer close(events)
		for ev, err := range a.RunStream(runCtx(t), e.rt, "work", &agent.RunOptions{RunID: "p1"}) {
			if err != nil {
				t.Error(err)
				return
			}
			events <- item{string(ev.Kind), ev}
		}
	}()
	<-inTool
	info, err := agentInfo(e.rt.Pause(t.Context(), agent.RunRef{Name: "worker", RunID: "p1"}, "lunch"))
	if err != nil || info.Pause == nil || info.Paused {
		t.Fatalf("pause asked during the step: %+v, %v", info, err)
	}
	close(release)
	var seen []string
	for it := range events {
		seen = append(seen, it.kind)
		if it.kind == "pause" && it.ev.Pause.Paused {
			if it.ev.Pause.Step != 2 || it.ev.Pause.Reason != "lunch" {
				t.Errorf("pause event %+v", it.ev.Pause)
			}
			break
		}
	}
	st, err := e.rt.LoadState(t.Context(), "p1")
	if err != nil || !st.Paused() || st.Pause.Step != 2 || len(st.ToolCalls) != 1 || calls.Load() != 1 {
		t.Fatalf("paused run: %+v, %v; %d model calls", st, err, calls.Load())
	}
	// Nothing moves while it is paused, and pausing again changes nothing.
	if st, err := agentInfo(e.rt.Pause(t.Context(), agent.RunRef{Name: "worker", RunID: "p1"}, "again")); err != nil || st.Pause.Reason != "lunch" {
		t.Errorf("a second pause: %+v, %v", st.Pause, err)
	}
	e.settle(t)
	if calls.Load() != 1 {
		t.Fatalf("%d model calls while paused", calls.Load())
	}

	// Resume from another process: a runtime of its own on the broker and store.
	other := agent.NewRuntime(calf.NewClient(e.broker, nil), e.store, nil)
	if st, err := agentInfo(other.Resume(t.Context(), agent.RunRef{Name: "worker", RunID: "p1"})); err != nil || st.Pause != nil || st.Paused {
		t.Fatalf("resume: %+v, %v", st, err)
	}
	if st, err := e.rt.LoadState(t.Context(), "p1"); err != nil || st.Resumes != 1 {
		t.Fatalf("after resume: %+v, %v", st, err)
	}
	var output string
	for it := range events {
		seen = append(seen, it.kind)
		if it.kind == "output" {
			output = string(it.ev.Output.Content)
		}
	}
	got := strings.Join(seen, " ")
	if !strings.Contains(got, "tool_result inference pause pause inference") || !strings.HasSuffix(got, "output") || output != `"done: worked"` || calls.Load() != 2 {
		t.Errorf("stream %s; output %s; %d model calls", got, output, calls.Load())
	}
	// An ended run is neither paused nor resumed; an unknown one is not found.
	if _, err := e.rt.Pause(t.Context(), agent.RunRef{Name: "worker", RunID: "p1"}, "x"); !errors.Is(err, agent.ErrRunEnded) {
		t.Errorf("pause of an ended run: %v", err)
	}
	if _, err := e.rt.Resume(t.Context(), agent.RunRef{Name: "worker", RunID: "p1"}); !errors.Is(err, agent.ErrRunEnded) {
		t.Errorf("resume of an ended run: %v", err)
	}
	if _, err := e.rt.Resume(t.Context(), agent.RunRef{Name: "worker", RunID: "nope"}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("resume of an unknown run: %v", err)
	}
	// A run paused before its input is handled starts paused.
	if _, err := e.rt.Pause(t.Context(), agent.RunRef{Name: "worker", RunID: "p2"}, "not yet"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Submit(t.Context(), e.rt, "work", &agent.RunOptions{RunID: "p2"}); err != nil {
		t.Fatal(err)
	}
	e.settle(t)
	st, err = e.rt.LoadState(t.Context(), "p2")
	if err != nil || !st.Paused() || st.Step != 1 || len(st.Messages) != 1 || calls.Load() != 2 {
		t.Errorf("a run paused before it started: %+v, %v; %d model calls", st, err, calls.Load())
	}
}

// A pause that has not taken effect is undone by a resume: the run goes on
// without stopping. A paused run can be cancelled.
func TestResumeBeforeThePauseTakesEffect(t *testing.T) {
	e := newEnv(t, nil)
	inModel, release := make(chan struct{}, 4), make(chan struct{})
	var calls atomic.Int64
	a := serve(t, e, agent.Must(agent.New("thinker", counted(&calls, func(ctx context.Context, _ *model.Request) (*model.Response, error) {
		inModel <- struct{}{}
		<-release
		return modeltest.Text("thought"), nil
	}), nil)))
	id, err := a.Submit(t.Context(), e.rt, "think", nil)
	if err != nil {
		t.Fatal(err)
	}
	<-inModel
	if _, err := e.rt.Pause(t.Context(), agent.RunRef{Name: "thinker", RunID: id}, "wait"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.rt.Resume(t.Context(), agent.RunRef{Name: "thinker", RunID: id}); err != nil {
		t.Fatal(err)
	}
	close(release)
	e.settle(t)
	out, err := a.Wait(runCtx(t), e.rt, id)
	if err != nil || out.Output != "thought" {
		t.Fatalf("%+v, %v", out, err)
	}

	// A paused run cancelled. Its first model call waits for the pause:
	// otherwise the loop may spend its turns, and fail, before it.
	looping, pausing := make(chan struct{}, 1), make(chan struct{})
	var first sync.Once
	b := serve(t, e, agent.Must(agent.New("looper", modeltest.FunctionModel(func(context.Context, *model.Request) (*model.Response, error) {
		first.Do(func() {
			looping <- struct{}{}
			<-pausing
		})
		return modeltest.ToolCalls(modeltest.Call("", "nap", `{}`)), nil
	}), &agent.Options{Tools: []tool.Tool{tool.Must(tool.New("nap", "Nap.", func(context.Context, struct{}) (string, error) { return "zz", nil }))}})))
	id, err = b.Submit(t.Context(), e.rt, "loop", nil)
	if err != nil {
		t.Fatal(err)
	}
	<-looping
	if _, err := e.rt.Pause(t.Context(), agent.RunRef{Name: "looper", RunID: id}, "stop looping"); err != nil {
		t.Fatal(err)
	}
	close(pausing)
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := e.rt.LoadState(t.Context(), id)
		if err == nil && st.Paused() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not paused: %+v, %v", st, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := e.rt.Cancel(t.Context(), agent.RunRef{Name: "looper", RunID: id}, "enough"); err != nil {
		t.Fatal(err)
	}
	e.settle(t)
	if _, err := b.Wait(runCtx(t), e.rt, id); !errors.Is(err, agent.ErrRunCancelled) {
		t.Errorf("a paused run cancelled: %v", err)
	}
}

// A session whose run in progress is paused says so, in SessionInfo and
// in the list; resumed and ended, it is idle.
func TestSessionStatusPaused(t *testing.T) {
	e := newEnv(t, nil)
	a := serve(t, e, agent.Must(agent.New("chat", modeltest.NewTestModel(modeltest.Text("hi")), nil)))
	ctx := runCtx(t)
	if _, err := e.rt.Pause(ctx, agent.RunRef{Name: "chat", RunID: "r1"}, "later"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Submit(ctx, e.rt, "hello", &agent.RunOptions{RunID: "r1", SessionID: "s"}); err != nil {
		t.Fatal(err)
	}
	e.settle(t)
	info, err := session.LoadInfo(ctx, e.rt.Store(), "s")
	if err != nil || info.Status != session.Paused {
		t.Fatalf("session info %+v, %v; want paused", info, err)
	}
	page, err := session.List(ctx, e.rt.Store(), nil)
	if err != nil || len(page.Sessions) != 1 || page.Sessions[0].Status != session.Paused {
		t.Fatalf("sessions %+v, %v; want s paused", page, err)
	}
	if _, err := e.rt.Resume(ctx, agent.RunRef{Name: "chat", RunID: "r1"}); err != nil {
		t.Fatal(err)
	}
	e.settle(t)
	if st, err := e.rt.LoadState(ctx, "r1"); err != nil || st.Status != agent.RunComplete {
		t.Fatalf("resumed run: %+v, %v", st, err)
	}
	if info, err := session.LoadInfo(ctx, e.rt.Store(), "s"); err != nil || info.Status != session.Idle || info.Messages != 2 {
		t.Errorf("after the run: %+v, %v; want idle with 2 messages", info, err)
	}
}
