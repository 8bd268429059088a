package team_test

import (
	"context"
	"errors"
	"testing"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/team"
)

// Team.Wait waits for a run that Submit started, from a runtime that did
// not start it, and answers a run that has ended at once, with the same
// output; a failed run gives an *agent.RunError of Kind "team", and an id
// of no run an error matching store.ErrNotFound.
func TestWaitAfterSubmit(t *testing.T) {
	e := newEnv(t, nil)
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	newAgent(t, e, "slowpoke", func(p string) (string, error) {
		started <- struct{}{}
		<-release
		if p == "fail" {
			return "", errors.New("no ink")
		}
		return "done(" + p + ")", nil
	})
	tm := serve(t, e, team.Must(team.NewSequential("waited", []team.Member{team.RemoteAgent("slowpoke", "")}, nil)))
	other := agent.NewRuntime(e.rt.Client(), e.rt.Store(), nil)

	id, err := tm.Submit(t.Context(), e.rt, "cats", nil)
	if err != nil || id == "" {
		t.Fatalf("submit = %q, %v", id, err)
	}
	<-started
	type result struct {
		out *team.Output
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := tm.Wait(runCtx(t), other, id)
		done <- result{out, err}
	}()
	select {
	case r := <-done:
		t.Fatalf("Wait returned before the run ended: %+v, %v", r.out, r.err)
	default:
	}
	close(release)
	r := <-done
	if r.err != nil || r.out.Output != "done(cats)" || r.out.RunID != id {
		t.Fatalf("Wait = %+v, %v", r.out, r.err)
	}
	again, err := tm.Wait(t.Context(), e.rt, id)
	if err != nil || again.Output != r.out.Output {
		t.Errorf("Wait after the end = %+v, %v", again, err)
	}

	fid, err := tm.Submit(t.Context(), e.rt, "fail", &team.RunOptions{RunID: "failing"})
	if err != nil || fid != "failing" {
		t.Fatalf("submit = %q, %v", fid, err)
	}
	<-started
	_, err = tm.Wait(runCtx(t), other, "failing")
	var re *agent.RunError
	if !errors.Is(err, agent.ErrRunFailed) || !errors.As(err, &re) || re.Kind != "team" || re.Name != "waited" || re.RunID != "failing" {
		t.Errorf("Wait of a failed run = %v (%+v)", err, re)
	}

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	if _, err := tm.Wait(ctx, e.rt, "no-such-run"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Wait of an unknown run = %v, want store.ErrNotFound", err)
	}
}
