package agent_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/store"
)

// Wait returns a submitted run's output once it ends, and at once for a
// run that has ended; for a run that handed off, the chain's output.
func TestWaitForSubmittedRun(t *testing.T) {
	e := newEnv(t, nil)
	a, _, _ := newW1(t, e)
	id, err := a.Submit(runCtx(t), e.rt, "add 2 and 3", nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := a.Wait(runCtx(t), e.rt, id)
	if err != nil || out.Output != "The sum is 5" || out.RunID != id {
		t.Fatalf("wait: %+v, %v", out, err)
	}
	again, err := a.Wait(runCtx(t), e.rt, id)
	if err != nil || again.Output != out.Output || again.Steps != out.Steps {
		t.Errorf("wait for an ended run: %+v, %v", again, err)
	}

	p := newTriagePair(t, e, nil)
	if _, err := p.triage.Submit(runCtx(t), e.rt, "I want my money back", &agent.RunOptions{RunID: "h1"}); err != nil {
		t.Fatal(err)
	}
	out, err = p.triage.Wait(runCtx(t), e.rt, "h1")
	if err != nil || out.Output != "Your refund is on its way." || out.RunID != "h1.handoff.1" || len(out.Chain) != 1 {
		t.Errorf("wait for a run that handed off: %+v, %v", out, err)
	}
}

// A run that fails gives Wait the *RunError Result gives.
func TestWaitForFailedRun(t *testing.T) {
	e := newEnv(t, nil)
	a := serve(t, e, agent.Must(agent.New("failing", modeltest.FunctionModel(func(context.Context, *model.Request) (*model.Response, error) {
		return nil, errors.New("the model is down")
	}), nil)))
	id, err := a.Submit(runCtx(t), e.rt, "hi", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.Wait(runCtx(t), e.rt, id)
	var re *agent.RunError
	if !errors.As(err, &re) || re.Status != agent.RunFailed || re.RunID != id {
		t.Errorf("wait for a failed run: %v; want a *RunError of a failed run", err)
	}
}

// Wait returns when its context ends, and the run goes on; an unknown run
// id is an error matching store.ErrNotFound once the agent's StartTimeout
// has passed without a record of the run.
func TestWaitStopsWithItsContext(t *testing.T) {
	e := newEnv(t, nil)
	called, release := make(chan struct{}, 1), make(chan struct{})
	a := serve(t, e, agent.Must(agent.New("slow", modeltest.FunctionModel(func(ctx context.Context, _ *model.Request) (*model.Response, error) {
		select {
		case called <- struct{}{}:
		default:
		}
		select {
		case <-release:
			return modeltest.Text("finally"), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}), &agent.Options{StartTimeout: 100 * time.Millisecond})))
	id, err := a.Submit(runCtx(t), e.rt, "hi", nil)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-called:
	case <-runCtx(t).Done():
		t.Fatal("the model was not called")
	}
	ctx, cancel := context.WithCancel(runCtx(t))
	done := make(chan error, 1)
	go func() {
		_, err := a.Wait(ctx, e.rt, id)
		done <- err
	}()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("wait with a cancelled context: %v; want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Wait did not return when its context was cancelled")
	}
	// The run went on: released, it completes.
	close(release)
	if out, err := a.Wait(runCtx(t), e.rt, id); err != nil || out.Output != "finally" {
		t.Errorf("wait after the release: %+v, %v", out, err)
	}

	_, err = a.Wait(runCtx(t), e.rt, "no-such-run")
	if !errors.Is(err, store.ErrNotFound) {
		t.Errorf("wait for an unknown run: %v; want store.ErrNotFound", err)
	}
}
