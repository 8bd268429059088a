package team_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/brokertest"
	"github.com/calf-go/calf/team"
)

// A team run paused during a step finishes the step, waits before the
// next, and finishes once resumed from another runtime.
func TestTeamPauseAndResume(t *testing.T) {
	e := newEnv(t, nil)
	release := make(chan struct{})
	first := newAgent(t, e, "first", func(p string) (string, error) {
		<-release
		return "first(" + p + ")", nil
	})
	second := wrapper(t, e, "second")
	tm := serve(t, e, team.Must(team.NewSequential("pair", members(first, second), nil)))

	var kinds []string
	events := make(chan team.Event, 64)
	go func() {
		defer close(events)
		for ev, err := range tm.RunStream(runCtx(t), e.rt, "go", &team.RunOptions{RunID: "tp"}) {
			if err != nil {
				t.Error(err)
				return
			}
			events <- ev
		}
	}()
	// Wait for the first member's run to start, then pause.
	for deadline := time.Now().Add(10 * time.Second); first.calls.Load() == 0; time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the first member did not start")
		}
	}
	if err := tm.Pause(t.Context(), e.rt, "tp", "review"); err != nil {
		t.Fatalf("pause: %v", err)
	}
	if st, err := loadTeamRun(t.Context(), e.rt, "tp"); err != nil || st.Pause == nil || st.Paused {
		t.Fatalf("paused state: %+v, %v", st, err)
	}
	close(release)
	for ev := range events {
		kinds = append(kinds, string(ev.Kind))
		if ev.Kind == team.EventPause {
			if !ev.Pause.Paused || ev.Pause.Step != 2 || ev.Pause.Reason != "review" {
				t.Errorf("pause event %+v", ev.Pause)
			}
			break
		}
	}
	e.settle(t)
	st, err := loadTeamRun(t.Context(), e.rt, "tp")
	if err != nil || !st.Paused || second.calls.Load() != 0 || len(st.Transcript) != 1 {
		t.Fatalf("paused team run: %+v, %v; second called %d times", st, err, second.calls.Load())
	}
	other := agent.NewRuntime(calf.NewClient(e.broker, nil), e.rt.Store(), nil)
	if err := tm.Resume(t.Context(), other, "tp"); err != nil {
		t.Fatal(err)
	}
	var output string
	for ev := range events {
		kinds = append(kinds, string(ev.Kind))
		if ev.Kind == team.EventOutput {
			output = string(ev.Output.Content)
		}
	}
	if output != `"second(first(go))"` || !strings.Contains(strings.Join(kinds, " "), "pause pause step") {
		t.Errorf("output %s; events %v", output, kinds)
	}
	if err := tm.Resume(t.Context(), e.rt, "tp"); !errors.Is(err, agent.ErrRunEnded) {
		t.Errorf("resume of an ended run: %v", err)
	}
}

// failingPublish fails, once each, the publishes of the messages fail
// picks.
type failingPublish struct {
	calf.Broker
	mu     sync.Mutex
	fail   func(*calf.Message) bool
	failed map[string]bool
}

func (f *failingPublish) Publish(ctx context.Context, msg *calf.Message) error {
	f.mu.Lock()
	bad := f.fail(msg) && !f.failed[msg.ID]
	if bad {
		f.failed[msg.ID] = true
	}
	f.mu.Unlock()
	if bad {
		return errors.New("broker unreachable")
	}
	return f.Broker.Publish(ctx, msg)
}

// waitTeamPaused waits for the pause of the team run id to take effect.
func waitTeamPaused(t *testing.T, e *env, id string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(2 * time.Millisecond) {
		st, err := loadTeamRun(t.Context(), e.rt, id)
		if err != nil {
			t.Fatal(err)
		}
		if st.Paused {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pause of %s did not take effect: %+v", id, st)
		}
	}
}

// A resume whose step event cannot be sent (the broker unreachable) is
// recorded: the run waits for nothing but the step event, which Resume
// called again, or Recover, sends; every event published twice and
// handled twice, the run ends with one output and each member run once.
// Recover leaves a paused run paused.
func TestTeamResumeAgain(t *testing.T) {
	for _, again := range []string{"resume", "recover"} {
		t.Run(again, func(t *testing.T) {
			e := newEnv(t, func(b calf.Broker) calf.Broker {
				return &failingPublish{Broker: brokertest.DuplicateDeliveries(brokertest.DuplicatePublishes(b, 2), 2), failed: map[string]bool{},
					fail: func(m *calf.Message) bool { return m.ID == "ra.step.2.resume.1" }}
			})
			release := make(chan struct{})
			first := newAgent(t, e, "first", func(p string) (string, error) {
				<-release
				return "first(" + p + ")", nil
			})
			second := wrapper(t, e, "second")
			tm := serve(t, e, team.Must(team.NewSequential("pair", members(first, second), nil)))
			ctx := runCtx(t)
			if _, err := tm.Submit(ctx, e.rt, "go", &team.RunOptions{RunID: "ra"}); err != nil {
				t.Fatal(err)
			}
			for deadline := time.Now().Add(10 * time.Second); first.calls.Load() == 0; time.Sleep(2 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the first member did not start")
				}
			}
			if err := tm.Pause(ctx, e.rt, "ra", "wait"); err != nil {
				t.Fatal(err)
			}
			close(release)
			waitTeamPaused(t, e, "ra")
			e.settle(t)
			if again == "recover" {
				if _, err := tm.Recover(ctx, e.rt, nil); err != nil {
					t.Fatal(err)
				}
				e.settle(t)
				if st, err := loadTeamRun(ctx, e.rt, "ra"); err != nil || !st.Paused || second.calls.Load() != 0 {
					t.Fatalf("recovered paused run: %+v, %v; second called %d times", st, err, second.calls.Load())
				}
			}
			if err := tm.Resume(ctx, e.rt, "ra"); err == nil {
				t.Fatal("the first resume's publish did not fail")
			}
			if st, err := loadTeamRun(ctx, e.rt, "ra"); err != nil || st.Paused || st.Pause != nil {
				t.Fatalf("resumed run: %+v, %v", st, err)
			}
			e.settle(t)
			if n := second.calls.Load(); n != 0 {
				t.Fatalf("second called %d times without its step", n)
			}
			switch again {
			case "resume":
				if err := tm.Resume(ctx, e.rt, "ra"); err != nil {
					t.Fatal(err)
				}
				// From a process without the definition, after the step
				// was sent: nothing more, or the run has ended.
				other := agent.NewRuntime(calf.NewClient(e.broker, nil), e.rt.Store(), nil)
				if _, err := resumeTeamRun(ctx, other, "ra"); err != nil && !errors.Is(err, agent.ErrRunEnded) {
					t.Fatal(err)
				}
			case "recover":
				if n, err := tm.Recover(ctx, e.rt, nil); err != nil || n != 1 {
					t.Fatalf("Recover = %d, %v", n, err)
				}
			}
			out, err := tm.Wait(ctx, e.rt, "ra")
			if err != nil || out.Output != "second(first(go))" {
				t.Fatalf("Wait = %+v, %v", out, err)
			}
			e.settle(t)
			if f, s := first.calls.Load(), second.calls.Load(); f != 1 || s != 1 {
				t.Errorf("model calls: first %d, second %d", f, s)
			}
			if n := e.published(team.OutputChannel("pair")); n != 1 {
				t.Errorf("%d outputs", n)
			}
			if n := e.published(team.StepChannel("pair")); n != 3 {
				t.Errorf("%d step events, want 3 (steps 1 and 2, and the resume's)", n)
			}
		})
	}
}
