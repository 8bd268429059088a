package agent

import (
	"testing"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/store"
	storemem "github.com/calf-go/calf/store/memory"
)

// The start check cancels a run that no process took, and never one that a
// worker has taken meanwhile.
func TestCancelUnstarted(t *testing.T) {
	b := memory.New(nil)
	t.Cleanup(func() { _ = b.Close() })
	st := storemem.New()
	rt := NewRuntime(calf.NewClient(b, nil), st, nil)
	ctx := t.Context()

	started, err := rt.cancelUnstarted(ctx, "r1", "calc", "nobody serves calc")
	if err != nil || started {
		t.Fatalf("cancelUnstarted of a run nobody took = %v, %v", started, err)
	}
	if got, err := rt.LoadAgentRun(ctx, "r1"); err != nil || got.Status != RunCancelled || got.Error != "nobody serves calc" {
		t.Fatalf("the run nobody took: %+v, %v", got, err)
	}

	taken := &runState{RunID: "r2", Agent: "calc", Status: RunRunning, Step: 1}
	data, err := taken.encode()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Put(ctx, store.KindRun, "r2", data, 0); err != nil {
		t.Fatal(err)
	}
	started, err = rt.cancelUnstarted(ctx, "r2", "calc", "nobody serves calc")
	if err != nil || !started {
		t.Fatalf("cancelUnstarted of a run a worker took = %v, %v; want started", started, err)
	}
	if got, err := rt.LoadAgentRun(ctx, "r2"); err != nil || got.Status != RunRunning {
		t.Fatalf("the run a worker took was changed: %+v, %v", got, err)
	}
}
