package agent_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/agent/approval"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/internal/signals"
	"github.com/calf-go/calf/internal/testwait"
	"github.com/calf-go/calf/store/sqlite"
)

// A run served on an in-process broker waits for an approval that another
// process answers, sharing only the SQLite file: that process records the
// answer (its own broker reaches no one, or it has none: approval.Respond
// with a nil client), which indexes it as a signal sent to the run, and the
// runtime serving the run, which reads that index, carries it out and
// empties the index.
func TestApprovalAnsweredFromAnotherProcess(t *testing.T) {
	for _, worker := range []bool{false, true} {
		t.Run(map[bool]string{false: "runtime", true: "worker"}[worker], func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "calf.db")
			open := func(worker bool) *agent.Runtime {
				st, err := sqlite.Open(path, nil)
				if err != nil {
					t.Fatal(err)
				}
				b := memory.New(nil)
				t.Cleanup(func() {
					_ = b.Close()
					_ = st.Close()
				})
				if !worker {
					c := calf.NewClient(b, nil)
					t.Cleanup(func() { _ = c.Close() })
					return agent.NewRuntime(c, st, nil)
				}
				w := agent.NewWorker(b, st, nil)
				ctx, stop := context.WithCancel(context.Background())
				ran := make(chan error, 1)
				go func() { ran <- w.Run(ctx) }()
				t.Cleanup(func() {
					stop()
					<-ran
				})
				return w.Runtime()
			}
			serving := open(worker)
			a, runs, _ := approvalAgent(t, nil, serving, agent.Permissions{Mode: agent.PermissionAsk}, "add")
			done := startRun(t, a, serving, "r1")
			req := pending(t, serving, "r1")

			// The answering process's broker reaches no one.
			answering := open(false)
			if _, err := approval.Respond(t.Context(), answering.Store(), answering.Client(), req.ID, approval.Answer{Approve: true, Digest: req.Digest}); err != nil {
				t.Fatal(err)
			}
			r := wait(t, done)
			if r.err != nil || r.out.Output != "The result is 5" {
				t.Fatalf("run: %+v, %v", r.out, r.err)
			}
			if n := runs.Load(); n != 1 {
				t.Errorf("the approved tool ran %d times, want 1", n)
			}

			// Recorded only, by a process with no broker at all.
			done = startRun(t, a, serving, "r2")
			req = pending(t, serving, "r2")
			st, err := sqlite.Open(path, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = st.Close() })
			if a, err := approval.Respond(t.Context(), st, nil, req.ID, approval.Answer{Approve: true, Digest: req.Digest}); err != nil || a.Status != approval.Approved {
				t.Fatalf("answer with no client: %+v, %v", a, err)
			}
			if r := wait(t, done); r.err != nil || r.out.Output != "The result is 5" {
				t.Fatalf("run r2: %+v, %v", r.out, r.err)
			}
			if n := runs.Load(); n != 2 {
				t.Errorf("the approved tool ran %d times, want 2", n)
			}
			// The answers carried out leave nothing in the index.
			testwait.For(t, 10*time.Second, "the index of answers to empty", func() bool {
				recs, err := st.List(t.Context(), signals.KindWoken, "", "", 0)
				return err == nil && len(recs) == 0
			})
		})
	}
}
