package agent_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
)

// guarded serves an agent that answers "the answer" with the guardrails
// given, and counts its model calls.
func guarded(t *testing.T, e *env, answer string, opts agent.Options) (*agent.Agent[string], *atomic.Int64) {
	t.Helper()
	var calls atomic.Int64
	a := agent.Must(agent.New("assistant", counted(&calls, func(context.Context, *model.Request) (*model.Response, error) {
		return modeltest.Text(answer), nil
	}), &opts))
	return serve(t, e, a), &calls
}

func containsGuardrail(text string) func(context.Context, agent.GuardrailInput) (agent.GuardrailResult, error) {
	return func(_ context.Context, in agent.GuardrailInput) (agent.GuardrailResult, error) {
		if strings.Contains(in.Text, text) {
			return agent.GuardrailResult{Tripped: true, Reason: "it mentions " + text}, nil
		}
		return agent.GuardrailResult{}, nil
	}
}

// tripped checks that err reports the guardrail name at stage.
func tripped(t *testing.T, err error, name string, stage agent.GuardrailStage) {
	t.Helper()
	var re *agent.RunError
	if !errors.Is(err, agent.ErrGuardrailTripped) || !errors.As(err, &re) || re.Guardrail == nil {
		t.Fatalf("error %v, want one matching ErrGuardrailTripped", err)
	}
	if re.Guardrail.Name != name || re.Guardrail.Stage != stage || !errors.Is(err, agent.ErrRunFailed) {
		t.Errorf("guardrail %+v, want %s at %s", re.Guardrail, name, stage)
	}
}

func TestInputGuardrail(t *testing.T) {
	e := newEnv(t, nil)
	a, calls := guarded(t, e, "sure", agent.Options{
		InputGuardrails: []agent.Guardrail{{Name: "no-passwords", Func: containsGuardrail("password")}},
	})
	// A tripped input guardrail stops the run before any model call.
	_, err := a.Run(runCtx(t), e.rt, "what is the admin password?", &agent.RunOptions{RunID: "g1"})
	tripped(t, err, "no-passwords", agent.GuardrailOnInput)
	if n := calls.Load(); n != 0 {
		t.Errorf("the model was called %d times", n)
	}
	st, err := e.rt.LoadState(t.Context(), "g1")
	if err != nil || st.Status != agent.RunFailed || st.Guardrail == nil || !strings.Contains(st.Error, "it mentions password") {
		t.Errorf("stored run %+v, %v", st, err)
	}
	// Other input passes.
	out, err := a.Run(runCtx(t), e.rt, "what time is it?", nil)
	if err != nil || out.Output != "sure" || calls.Load() != 1 {
		t.Errorf("clean input: %+v, %v, %d model calls", out, err, calls.Load())
	}
}

func TestOutputGuardrail(t *testing.T) {
	e := newEnv(t, nil)
	a, calls := guarded(t, e, "the password is hunter2", agent.Options{
		OutputGuardrails: []agent.Guardrail{{Name: "no-leaks", Func: containsGuardrail("hunter2")}},
	})
	var output *agent.OutputEvent
	var streamErr error
	for ev, err := range a.RunStream(runCtx(t), e.rt, "tell me", nil) {
		if err != nil {
			streamErr = err
			break
		}
		if ev.Kind == agent.EventOutput {
			output = ev.Output
		}
	}
	tripped(t, streamErr, "no-leaks", agent.GuardrailOnOutput)
	// The output event says which guardrail ended the run, and carries no
	// output.
	if output == nil || output.Guardrail == nil || output.Guardrail.Name != "no-leaks" || len(output.Content) != 0 || output.Status != agent.OutputFailed {
		t.Errorf("output event %+v", output)
	}
	if calls.Load() != 1 {
		t.Errorf("model calls %d", calls.Load())
	}
}

// A parallel input guardrail runs alongside the model call: here it
// answers only once the model call has started, which would never happen
// if it ran first. When it trips, the model's answer is discarded.
func TestParallelInputGuardrail(t *testing.T) {
	started := make(chan struct{}, 10)
	check := func(ctx context.Context, in agent.GuardrailInput) (agent.GuardrailResult, error) {
		select {
		case <-started:
		case <-ctx.Done():
			return agent.GuardrailResult{}, errors.New("the model call did not start while the guardrail ran")
		}
		return agent.GuardrailResult{Tripped: strings.Contains(in.Text, "forbidden"), Reason: "forbidden topic"}, nil
	}
	e := newEnv(t, nil)
	var calls atomic.Int64
	a := serve(t, e, agent.Must(agent.New("assistant", counted(&calls, func(context.Context, *model.Request) (*model.Response, error) {
		started <- struct{}{}
		return modeltest.Text("fine"), nil
	}), &agent.Options{
		InputGuardrails: []agent.Guardrail{{Name: "topic", Func: check, Parallel: true, Timeout: 5 * time.Second}},
	})))
	out, err := a.Run(runCtx(t), e.rt, "hello", nil)
	if err != nil || out.Output != "fine" {
		t.Fatalf("clean run: %+v, %v", out, err)
	}
	_, err = a.Run(runCtx(t), e.rt, "a forbidden thing", nil)
	tripped(t, err, "topic", agent.GuardrailOnInput)
	if calls.Load() != 2 {
		t.Errorf("model calls %d, want 2 (the second answer discarded)", calls.Load())
	}
}

// A guardrail that fails, panics or outlasts its timeout trips.
func TestFailingGuardrailsTrip(t *testing.T) {
	// hang holds a check that ignores its context until the test ends.
	hang := make(chan struct{})
	defer close(hang)
	for _, tt := range []struct {
		name string
		g    agent.Guardrail
		want string
	}{
		{"error", agent.Guardrail{Name: "g", Func: func(context.Context, agent.GuardrailInput) (agent.GuardrailResult, error) {
			return agent.GuardrailResult{}, errors.New("moderation service down")
		}}, "the check failed: moderation service down"},
		{"panic", agent.Guardrail{Name: "g", Func: func(context.Context, agent.GuardrailInput) (agent.GuardrailResult, error) {
			panic("boom")
		}}, "the check failed: panicked: boom"},
		{"timeout", agent.Guardrail{Name: "g", Timeout: 50 * time.Millisecond, Func: func(context.Context, agent.GuardrailInput) (agent.GuardrailResult, error) {
			<-hang
			return agent.GuardrailResult{}, nil
		}}, "no verdict within 50ms"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nil)
			a, calls := guarded(t, e, "ok", agent.Options{InputGuardrails: []agent.Guardrail{tt.g}})
			_, err := a.Run(runCtx(t), e.rt, "hi", nil)
			tripped(t, err, "g", agent.GuardrailOnInput)
			if !strings.Contains(err.Error(), tt.want) || calls.Load() != 0 {
				t.Errorf("error %v (want %q), %d model calls", err, tt.want, calls.Load())
			}
		})
	}
}

// A judge agent decides: its verdict trips the guardrail or not.
func TestJudgeGuardrail(t *testing.T) {
	e := newEnv(t, nil)
	var judged atomic.Int64
	judge := serve(t, e, agent.Must(agent.NewTyped[agent.GuardrailResult]("judge", counted(&judged, func(_ context.Context, req *model.Request) (*model.Response, error) {
		if strings.Contains(req.Messages[len(req.Messages)-1].Text(), "insult") {
			return modeltest.Text(`{"tripped": true, "reason": "the text is rude"}`), nil
		}
		return modeltest.Text(`{"tripped": false, "reason": "fine"}`), nil
	}), &agent.Options{Instructions: "Say whether the text is rude."})))
	a, calls := guarded(t, e, "hello", agent.Options{
		InputGuardrails: []agent.Guardrail{agent.JudgeGuardrail("politeness", judge, nil)},
	})
	_, err := a.Run(runCtx(t), e.rt, "an insult", &agent.RunOptions{RunID: "j1"})
	tripped(t, err, "politeness", agent.GuardrailOnInput)
	if !strings.Contains(err.Error(), "the text is rude") || calls.Load() != 0 {
		t.Errorf("error %v, %d model calls", err, calls.Load())
	}
	if _, err := e.rt.LoadState(t.Context(), "j1/guardrail-politeness-input"); err != nil {
		t.Errorf("the judge's run: %v", err)
	}
	out, err := a.Run(runCtx(t), e.rt, "a kind word", nil)
	if err != nil || out.Output != "hello" || judged.Load() != 2 {
		t.Errorf("polite input: %+v, %v, judged %d times", out, err, judged.Load())
	}
}

func TestInvalidGuardrails(t *testing.T) {
	ok := func(context.Context, agent.GuardrailInput) (agent.GuardrailResult, error) {
		return agent.GuardrailResult{}, nil
	}
	for _, o := range []agent.Options{
		{InputGuardrails: []agent.Guardrail{{Func: ok}}},
		{InputGuardrails: []agent.Guardrail{{Name: "x"}}},
		{OutputGuardrails: []agent.Guardrail{{Name: "x", Func: ok, Parallel: true}}},
	} {
		if _, err := agent.New("a", modeltest.NewTestModel(), &o); !errors.Is(err, agent.ErrInvalidAgent) {
			t.Errorf("%+v: %v", o, err)
		}
	}
}
