package agent_test

import (
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/internal/signals"
	"github.com/calf-go/calf/internal/testwait"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/store/sqlite"
)

// A run served on an in-process broker waits for a signal that another
// process sends, sharing only the SQLite file (calf runs signal against a
// calf worker's file): the sender's wake reaches nobody, so it indexes the
// signal, and the process serving the run, which reads that index, wakes
// the run, once, and empties the index.
func TestSignalFromAnotherProcess(t *testing.T) {
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
	var steps atomic.Int64
	c, err := agent.NewCustom("listener", func(sc *agent.StepContext[struct{}], _ []model.Message) (string, error) {
		steps.Add(1)
		var v string
		if _, err := sc.WaitSignal("go", 0, &v); err != nil {
			return "", err
		}
		return v, nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Serve(t.Context(), serving, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Submit(runCtx(t), serving, "listen", &agent.RunOptions{RunID: "l-1"}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "the step to wait", func() bool { return steps.Load() == 1 })

	sending := open()
	if _, err := sending.Signal(t.Context(), agent.RunRef{Name: "listener", RunID: "l-1"}, "go", "hello"); err != nil {
		t.Fatal(err)
	}
	out, err := c.Wait(runCtx(t), serving, "l-1")
	if err != nil || out.Output != "hello" {
		t.Fatalf("run: %+v, %v", out, err)
	}
	if n := steps.Load(); n != 2 {
		t.Errorf("the step ran %d times, want 2 (the wait, then its signal)", n)
	}
	testwait.For(t, 10*time.Second, "the index of signals sent to empty", func() bool {
		recs, err := serving.Store().List(t.Context(), signals.KindWoken, "", "", 0)
		return err == nil && len(recs) == 0
	})
}
