package team_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/team"
	"github.com/calf-go/calf/workflow"
)

// The sweep removes finished team runs, with their member runs, and
// finished workflow runs, with their checkpoints; later runs stay. The
// test runs in a bubble: its clock moves only when the test sleeps.
func TestSweepTeamsAndWorkflows(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, nil)
		w := wrapper(t, e, "writer")
		tm := serve(t, e, team.Must(team.NewSequential("pipe", members(w), nil)))
		wf := workflow.New[draft]("shout", nil).
			Node("up", workflow.Func(func(_ context.Context, d draft) (draft, error) { d.Text += "!"; return d, nil })).
			Edge(workflow.Start, "up").Edge("up", workflow.End).MustBuild()
		if err := wf.Serve(t.Context(), e.rt, nil); err != nil {
			t.Fatal(err)
		}
		ctx := runCtx(t)
		old, err := tm.Run(ctx, e.rt, "old", &team.RunOptions{RunID: "team-old"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := wf.Run(ctx, e.rt, draft{Text: "old"}, &workflow.RunOptions{RunID: "wf-old"}); err != nil {
			t.Fatal(err)
		}
		// In the bubble, time passes only when the test sleeps, and the
		// sleeps take none.
		time.Sleep(time.Millisecond)
		cutoff := time.Now()
		time.Sleep(time.Millisecond)
		if _, err := tm.Run(ctx, e.rt, "new", &team.RunOptions{RunID: "team-new"}); err != nil {
			t.Fatal(err)
		}
		st := e.rt.Store()
		if recs, _ := st.List(ctx, store.KindCheckpoint, "wf-old/", "", 0); len(recs) == 0 {
			t.Fatal("the workflow run kept no checkpoints")
		}
		res, err := e.rt.Sweep(ctx, agent.SweepOptions{Before: cutoff})
		if err != nil {
			t.Fatal(err)
		}
		// The team run, its member's run, the workflow run.
		if res.Runs != 3 {
			t.Errorf("sweep %+v; want 3 runs", res)
		}
		if _, err := loadTeamRun(ctx, e.rt, "team-old"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("the old team run: %v", err)
		}
		if _, err := e.rt.LoadAgentRun(ctx, old.Transcript[0].RunID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("the old member run: %v", err)
		}
		if _, err := wf.LoadRun(ctx, e.rt, "wf-old"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("the old workflow run: %v", err)
		}
		if recs, _ := st.List(ctx, store.KindCheckpoint, "wf-old/", "", 0); len(recs) != 0 {
			t.Errorf("%d checkpoints of the old workflow run remain", len(recs))
		}
		if _, err := loadTeamRun(ctx, e.rt, "team-new"); err != nil {
			t.Errorf("the new team run was removed: %v", err)
		}
	})
}
