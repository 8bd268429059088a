package workflow_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/internal/signals"
	"github.com/calf-go/calf/internal/testwait"
	"github.com/calf-go/calf/store/sqlite"
	"github.com/calf-go/calf/workflow"
)

// A run served on an in-process broker is interrupted, and another
// process sharing only the SQLite file answers it (calf against a calf
// worker's file): the resume event that process emits reaches nobody, but
// the answer is a signal of the run, indexed for the process that serves
// it, which resumes the run without a restart, once.
func TestInterruptAnsweredFromAnotherProcess(t *testing.T) {
	path := filepath.Join(t.TempDir(), "calf.db")
	open := func() *agent.Runtime {
		st, err := sqlite.Open(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		b := memory.New(nil)
		c := calf.NewClient(b, nil)
		t.Cleanup(func() {
			_ = c.Close()
			_ = b.Close()
			_ = st.Close()
		})
		return agent.NewRuntime(c, st, nil)
	}
	serving := open()
	var c counts
	w := approvalFlow(&c)
	serve(t, w, serving)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if _, err := w.Run(ctx, serving, doc{Text: "p"}, &workflow.RunOptions{RunID: "r"}); !errors.Is(err, workflow.ErrInterrupted) {
		t.Fatal(err)
	}

	answering := open()
	if err := w.Answer(ctx, answering, "r", "ok"); err != nil {
		t.Fatal(err)
	}
	got, err := w.Wait(ctx, serving, "r")
	if err != nil {
		t.Fatal(err)
	}
	if got.Text != "p (ok)" {
		t.Errorf("state %+v", got)
	}
	if diff := cmp.Diff(map[string]int{"a": 1, "approve?": 2, "approve": 1, "b": 1}, c.get()); diff != "" {
		t.Errorf("nodes run (-want +got):\n%s", diff)
	}
	testwait.For(t, 10*time.Second, "the index of signals sent to empty", func() bool {
		recs, err := serving.Store().List(t.Context(), signals.KindWoken, "", "", 0)
		return err == nil && len(recs) == 0
	})
}

// The answer to an interrupt is the signal calf.interrupt.{n} of the run,
// kept under the run's key with the wait it answered until the run is
// swept.
func TestInterruptAnswerIsSignal(t *testing.T) {
	rt := newRuntime(t)
	var c counts
	w := approvalFlow(&c)
	serve(t, w, rt)
	if _, err := w.Run(t.Context(), rt, doc{Text: "p"}, &workflow.RunOptions{RunID: "r"}); !errors.Is(err, workflow.ErrInterrupted) {
		t.Fatal(err)
	}
	key := "workflow/" + w.Name() + "/r/"
	if recs, err := rt.Store().List(t.Context(), signals.KindWaiter, key, "", 0); err != nil || len(recs) != 1 || recs[0].ID != key+"calf.interrupt.1" {
		t.Fatalf("waiters of the interrupted run: %v, %v", recs, err)
	}
	if err := w.Answer(t.Context(), rt, "r", "ok"); err != nil {
		t.Fatal(err)
	}
	if got, err := w.Wait(t.Context(), rt, "r"); err != nil || got.Text != "p (ok)" {
		t.Fatalf("run: %+v, %v", got, err)
	}
	sig, ok, err := signals.Next(t.Context(), rt.Store(), "workflow/"+w.Name()+"/r", "calf.interrupt.1", "")
	if err != nil || !ok || string(sig.Value) != `"ok"` {
		t.Fatalf("the answer's signal: %+v, %v, %v", sig, ok, err)
	}
	if recs, err := rt.Store().List(t.Context(), signals.KindWaiter, key, "", 0); err != nil || len(recs) != 0 {
		t.Errorf("waiters of the answered run: %v, %v", recs, err)
	}
	if _, err := rt.Sweep(t.Context(), agent.SweepOptions{Before: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{signals.Kind, signals.KindCall, signals.KindWaiter, signals.KindCursor, signals.KindWoken} {
		if recs, err := rt.Store().List(t.Context(), kind, key, "", 0); err != nil || len(recs) != 0 {
			t.Errorf("%s records of the swept run: %v, %v", kind, recs, err)
		}
	}
}

// The signal calf.interrupt.{n} is Calf's own: a caller sending it by name
// is refused, and the run stays interrupted until Answer.
func TestInterruptSignalIsReserved(t *testing.T) {
	rt := newRuntime(t)
	var c counts
	w := approvalFlow(&c)
	serve(t, w, rt)
	if _, err := w.Run(t.Context(), rt, doc{Text: "p"}, &workflow.RunOptions{RunID: "r"}); !errors.Is(err, workflow.ErrInterrupted) {
		t.Fatal(err)
	}
	ref := agent.RunRef{Kind: "workflow", Name: w.Name(), RunID: "r"}
	if _, err := rt.Signal(t.Context(), ref, "calf.interrupt.1", "by name"); err == nil {
		t.Fatal("a caller answered the interrupt by sending its signal")
	}
	if info, err := w.LoadRun(t.Context(), rt, "r"); err != nil || info.Status != workflow.RunInterrupted {
		t.Fatalf("after the refused signal: %+v, %v", info, err)
	}
	if recs, err := rt.Store().List(t.Context(), signals.Kind, "workflow/"+w.Name()+"/r/", "", 0); err != nil || len(recs) != 0 {
		t.Fatalf("signals recorded: %d, %v", len(recs), err)
	}
	if err := w.Answer(t.Context(), rt, "r", "ok"); err != nil {
		t.Fatal(err)
	}
	if got, err := w.Wait(t.Context(), rt, "r"); err != nil || got.Text != "p (ok)" {
		t.Fatalf("run: %+v, %v", got, err)
	}
}
