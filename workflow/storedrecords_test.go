package workflow_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/runner"
	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/workflow"
)

// storedRecord is a record of testdata/records: kind, id and data as the
// code before the workflow run view (RunInfo) wrote them; see
// testdata/records/README.md.
type storedRecord struct {
	Kind string          `json:"kind"`
	ID   string          `json:"id"`
	Data json.RawMessage `json:"data"`
}

// storedRuntime is a runtime whose store holds the records of the fixture
// name.
func storedRuntime(t *testing.T, name string) *agent.Runtime {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "records", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var recs []storedRecord
	if err := json.Unmarshal(data, &recs); err != nil {
		t.Fatal(err)
	}
	rt := newRuntime(t)
	for _, r := range recs {
		if _, err := rt.Store().Put(t.Context(), r.Kind, r.ID, r.Data, 0); err != nil {
			t.Fatal(err)
		}
	}
	return rt
}

// loadStored returns the view of the run id of w, and checks that the view
// made from its record alone is the same.
func loadStored[S any](t *testing.T, rt *agent.Runtime, w *workflow.Workflow[S], id string) *workflow.RunInfo {
	t.Helper()
	info, err := w.LoadRun(t.Context(), rt, id)
	if err != nil {
		t.Fatalf("LoadRun(%s): %v", id, err)
	}
	rec, err := rt.Store().Get(t.Context(), store.KindWorkflow, w.Name()+"/"+id)
	if err != nil {
		t.Fatal(err)
	}
	bare, err := workflow.DecodeRunInfo(rec.Data)
	if err != nil {
		t.Fatalf("DecodeRunInfo(%s): %v", id, err)
	}
	if diff := cmp.Diff(info, bare); diff != "" {
		t.Errorf("%s: LoadRun and DecodeRunInfo differ (-load +decode):\n%s", id, diff)
	}
	return info
}

func stateOf(t *testing.T, info *workflow.RunInfo) doc {
	t.Helper()
	var d doc
	if err := json.Unmarshal(info.State, &d); err != nil {
		t.Fatalf("%s: state %s: %v", info.ID, info.State, err)
	}
	return d
}

// listed checks that runner.Runs lists the runs of want ("id=status").
func listed(t *testing.T, s store.Store, want ...string) {
	t.Helper()
	runs, err := runner.Runs(t.Context(), s, &runner.RunFilter{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range runs {
		got = append(got, r.ID+"="+r.Status)
	}
	for _, w := range want {
		if !strings.Contains(" "+strings.Join(got, " ")+" ", " "+w+" ") {
			t.Errorf("runner.Runs = %v, want %s among them", got, w)
		}
	}
}

// Records written by the code before the workflow run view are read by
// this one: every run has a view, is listed and summarized, its
// checkpoints read; the interrupted run is answered and the run in
// progress recovered, and both end here.
func TestStoredRecords(t *testing.T) {
	t.Run("complete", func(t *testing.T) {
		rt := storedRuntime(t, "complete")
		var c counts
		w := linear(t, &c, "a", "b", "c")
		info := loadStored(t, rt, w, "wf-complete")
		if info.Status != workflow.RunComplete || info.Workflow != "linear" || info.Step != 3 || info.Node != workflow.End ||
			info.Checkpoint != 3 || info.LastStep != 3 || info.LastNode != "c" || info.Interrupt != nil || info.From != nil ||
			info.StartedAt.IsZero() || info.EndedAt.Before(info.StartedAt) {
			t.Errorf("wf-complete: %+v", info)
		}
		if diff := cmp.Diff(map[string]int{"a": 1, "b": 1, "c": 1}, info.Visits); diff != "" {
			t.Errorf("wf-complete visits (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(doc{Text: "in", Trail: []string{"a", "b", "c"}, N: 3}, stateOf(t, info)); diff != "" {
			t.Errorf("wf-complete state (-want +got):\n%s", diff)
		}
		if got, err := w.Wait(t.Context(), rt, "wf-complete"); err != nil || got.N != 3 {
			t.Errorf("Wait(wf-complete) = %+v, %v", got, err)
		}
		if cps, err := w.Checkpoints(t.Context(), rt, "wf-complete"); err != nil || len(cps) != 4 || cps[3].Node != "c" || cps[3].State.N != 3 {
			t.Errorf("Checkpoints(wf-complete) = %+v, %v", cps, err)
		}
		if fork := loadStored(t, rt, w, "wf-fork"); fork.Status != workflow.RunComplete || fork.From == nil ||
			*fork.From != (workflow.ForkFrom{Run: "wf-complete", Seq: 1}) {
			t.Errorf("wf-fork: %+v", fork)
		}

		writer := agent.Must(agent.New("writer", modeltest.NewTestModel(), nil))
		if ag := loadStored(t, rt, poet(writer), "wf-agent"); ag.Status != workflow.RunComplete || ag.Usage.Requests != 1 ||
			ag.Usage.TotalTokens == 0 || len(ag.Cost.Unpriced) != 1 || stateOf(t, ag).Text != "A poem about cats." {
			t.Errorf("wf-agent: %+v", ag)
		}
		bad := workflow.New[doc]("bad", nil).Node("a", mark("a", &c)).Edge(workflow.Start, "a").Edge("a", workflow.End).MustBuild()
		if failed := loadStored(t, rt, bad, "wf-failed"); failed.Status != workflow.RunFailed || failed.Error != `node "boom": boom` || failed.Node != "boom" {
			t.Errorf("wf-failed: %+v", failed)
		}
		if cancelled := loadStored(t, rt, approvalFlow(&c), "wf-cancelled"); cancelled.Status != workflow.RunCancelled || cancelled.Error != "not needed" {
			t.Errorf("wf-cancelled: %+v", cancelled)
		}
		listed(t, rt.Store(), "wf-complete=complete", "wf-fork=complete", "wf-agent=complete", "wf-failed=failed", "wf-cancelled=cancelled")
		run, err := runner.LoadRun(t.Context(), rt.Store(), "wf-failed")
		if err != nil || run.Workflow == nil || run.Agent != nil || run.Team != nil || run.Summary.Kind != "workflow" ||
			run.Summary.Name != "bad" || run.Summary.Status != "failed" || run.View() != any(run.Workflow) {
			t.Errorf("runner.LoadRun(wf-failed) = %+v, %v", run, err)
		}
	})

	t.Run("in_flight", func(t *testing.T) {
		rt := storedRuntime(t, "in_flight")
		var c counts
		ap := approvalFlow(&c)
		info := loadStored(t, rt, ap, "wf-interrupted")
		want := &workflow.InterruptInfo{N: 1, Step: 2, Node: "approve", Reason: "approve the plan?"}
		if info.Status != workflow.RunInterrupted || info.Step != 2 || info.Node != "approve" || info.Interrupts != 1 ||
			!cmp.Equal(info.Interrupt, want) || info.Checkpoint != 1 || info.LastNode != "a" {
			t.Errorf("wf-interrupted: %+v", info)
		}
		slow := workflow.New[doc]("slow", nil).
			Node("a", mark("a", &c)).
			Node("wait", workflow.Func(func(_ context.Context, s doc) (doc, error) {
				s.Trail = append(s.Trail, "wait")
				return s, nil
			})).
			Node("b", mark("b", &c)).
			Edge(workflow.Start, "a").Edge("a", "wait").Edge("wait", "b").Edge("b", workflow.End).MustBuild()
		if running := loadStored(t, rt, slow, "wf-running"); running.Status != workflow.RunRunning || running.Node != "wait" || running.Step != 2 {
			t.Errorf("wf-running: %+v", running)
		}
		listed(t, rt.Store(), "wf-interrupted=interrupted", "wf-running=running")

		serve(t, ap, rt)
		if err := ap.Answer(t.Context(), rt, "wf-interrupted", "yes"); err != nil {
			t.Fatal(err)
		}
		got, err := ap.Wait(t.Context(), rt, "wf-interrupted")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(doc{Text: "the plan (yes)", Trail: []string{"a", "b"}, N: 2}, got); diff != "" {
			t.Errorf("wf-interrupted answered (-want +got):\n%s", diff)
		}

		serve(t, slow, rt)
		if n, err := slow.Recover(t.Context(), rt, nil); err != nil || n != 1 {
			t.Fatalf("Recover = %d, %v", n, err)
		}
		got, err = slow.Wait(t.Context(), rt, "wf-running")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(doc{Text: "slowly", Trail: []string{"a", "wait", "b"}, N: 2}, got); diff != "" {
			t.Errorf("wf-running recovered (-want +got):\n%s", diff)
		}
	})
}
