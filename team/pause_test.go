package team_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
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
	if st, err := team.LoadRun(t.Context(), e.rt, "tp"); err != nil || st.Pause == nil || st.Paused {
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
	st, err := team.LoadRun(t.Context(), e.rt, "tp")
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
