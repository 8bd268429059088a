package team_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/runner"
	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/team"
)

// storedRecord is a record of testdata/records: kind, id and data as the
// code before the team run view (RunInfo) wrote them; see
// testdata/records/README.md.
type storedRecord struct {
	Kind string          `json:"kind"`
	ID   string          `json:"id"`
	Data json.RawMessage `json:"data"`
}

// storedEnv is an env whose store holds the records of the fixture name.
func storedEnv(t *testing.T, name string) *env {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "records", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var recs []storedRecord
	if err := json.Unmarshal(data, &recs); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, nil)
	for _, r := range recs {
		if _, err := e.rt.Store().Put(t.Context(), r.Kind, r.ID, r.Data, 0); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// loadStored returns the view of the team run id, and checks that the
// view made from its record alone is the same.
func loadStored(t *testing.T, e *env, id string) *team.RunInfo {
	t.Helper()
	info, err := loadTeamRun(t.Context(), e.rt, id)
	if err != nil {
		t.Fatalf("LoadRun(%s): %v", id, err)
	}
	rec, err := e.rt.Store().Get(t.Context(), store.KindTeam, id)
	if err != nil {
		t.Fatal(err)
	}
	bare, err := team.DecodeRunInfo(rec.Data)
	if err != nil {
		t.Fatalf("DecodeRunInfo(%s): %v", id, err)
	}
	if diff := cmp.Diff(info, bare); diff != "" {
		t.Errorf("%s: LoadRun and DecodeRunInfo differ (-load +decode):\n%s", id, diff)
	}
	return info
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

// Records written by the code before the team run view are read by this
// one: every run has a view, is listed and summarized, and the paused run
// resumes to its end here.
func TestStoredRecords(t *testing.T) {
	t.Run("complete", func(t *testing.T) {
		e := storedEnv(t, "complete")
		info := loadStored(t, e, "team-complete")
		want := []string{"1 member first: first(go)", "2 member second: second(first(go))"}
		if info.Status != agent.RunComplete || info.Team != "pair" || info.Process != team.Sequential || info.Task != "go" ||
			info.Step != 2 || info.Output != "second(first(go))" || info.SessionID != "s1" || info.Usage.Requests != 2 ||
			len(info.Current) != 0 || info.Paused || info.Pause != nil || info.StartedAt.IsZero() || info.EndedAt.Before(info.StartedAt) {
			t.Errorf("team-complete: %+v", info)
		}
		if diff := cmp.Diff(want, turns(info.Transcript)); diff != "" {
			t.Errorf("team-complete transcript (-want +got):\n%s", diff)
		}
		failed := loadStored(t, e, "team-failed")
		if failed.Status != agent.RunFailed || !strings.Contains(failed.Error, "the model refused") ||
			len(failed.Transcript) != 2 || !failed.Transcript[1].Failed() {
			t.Errorf("team-failed: %+v", failed)
		}
		listed(t, e.rt.Store(), "team-complete=complete", "team-failed=failed")
		if s, err := runner.Summarize(t.Context(), e.rt.Store(), "team-complete"); err != nil || s.Kind != "team" || s.Name != "pair" {
			t.Errorf("Summarize(team-complete) = %+v, %v", s, err)
		}
		tm := team.Must(team.NewSequential("pair", members(wrapper(t, e, "first"), wrapper(t, e, "second")), nil))
		if out, err := tm.Wait(runCtx(t), e.rt, "team-complete"); err != nil || out.Output != "second(first(go))" {
			t.Errorf("Wait(team-complete) = %+v, %v", out, err)
		}
	})

	t.Run("in_flight", func(t *testing.T) {
		e := storedEnv(t, "in_flight")
		paused := loadStored(t, e, "team-paused")
		if paused.Status != agent.RunRunning || !paused.Paused || paused.Pause == nil || paused.Pause.Reason != "review" ||
			paused.Pause.Step != 2 || paused.Step != 2 || len(paused.Transcript) != 1 || len(paused.Current) != 1 ||
			paused.Current[0].Member != "second" || paused.Current[0].Started || paused.Current[0].Prompt != "first(go)" {
			t.Errorf("team-paused: %+v", paused)
		}
		running := loadStored(t, e, "team-running")
		if running.Status != agent.RunRunning || running.Paused || running.Step != 1 || len(running.Current) != 1 ||
			!running.Current[0].Started || running.Current[0].RunID != "team-running.1.first" || len(running.Transcript) != 0 {
			t.Errorf("team-running: %+v", running)
		}
		listed(t, e.rt.Store(), "team-paused=paused", "team-running=running")

		tm := serve(t, e, team.Must(team.NewSequential("pair", members(wrapper(t, e, "first"), wrapper(t, e, "second")), nil)))
		if err := tm.Resume(t.Context(), e.rt, "team-paused"); err != nil {
			t.Fatal(err)
		}
		out, err := tm.Wait(runCtx(t), e.rt, "team-paused")
		if err != nil || out.Output != "second(first(go))" {
			t.Fatalf("team-paused resumed: %+v, %v", out, err)
		}
		if err := tm.Cancel(t.Context(), e.rt, "team-running", "enough"); err != nil {
			t.Fatal(err)
		}
		if info := loadStored(t, e, "team-running"); info.Status != agent.RunCancelled || info.Error != "enough" || len(info.Current) != 0 {
			t.Errorf("team-running cancelled: %+v", info)
		}
	})
}
