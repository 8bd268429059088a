package team_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/store/storetest"
	"github.com/calf-go/calf/team"
)

// Team runs whose coordinators write through a store that fails, loses
// replies, conflicts and races: every run ends with the right output, and
// every member runs once per run. The members and the caller use the
// healthy store, so what is tested is the coordinator.
func TestTeamsUnderStoreFaults(t *testing.T) {
	tests := []struct {
		name string
		f    storetest.Faults
	}{
		{"write failures", storetest.Faults{Seed: 1, WriteFailRate: 0.2}},
		{"lost replies", storetest.Faults{Seed: 2, LostReplyRate: 0.2}},
		{"conflicts", storetest.Faults{Seed: 3, ConflictRate: 0.3}},
		{"concurrent writers", storetest.Faults{Seed: 4, ConcurrentWriteRate: 0.3}},
		{"read failures", storetest.Faults{Seed: 5, ReadFailRate: 0.2}},
		{"everything", storetest.Faults{Seed: 6, WriteFailRate: 0.1, LostReplyRate: 0.1, ConflictRate: 0.1, ConcurrentWriteRate: 0.1, ReadFailRate: 0.1}},
	}
	const runs = 8
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nil)
			tt.f.Kinds = []string{store.KindTeam}
			fs := storetest.WithFaults(e.rt.Store(), tt.f)
			coord := agent.NewRuntime(e.rt.Client(), fs, nil)
			x, y, z := wrapper(t, e, "x"), wrapper(t, e, "y"), wrapper(t, e, "z")
			agg := team.AggregateFunc(func(_ context.Context, _ string, as []team.Turn) (string, error) {
				return as[0].Content + "+" + as[1].Content, nil
			})
			opts := &team.ServeOptions{MaxAttempts: 60}
			panel := team.Must(team.NewConcurrent("panel", members(y, z), agg, nil))
			seq := team.Must(team.NewSequential("seq", []team.Member{team.AgentMember(x.agent), panel}, nil))
			for _, tm := range []*team.Team{panel, seq} {
				if err := tm.Serve(t.Context(), coord, opts); err != nil {
					t.Fatal(err)
				}
			}
			var wg sync.WaitGroup
			errs := make([]error, runs)
			for i := range runs {
				wg.Go(func() {
					out, err := seq.Run(runCtx(t), e.rt, fmt.Sprint(i), &team.RunOptions{RunID: fmt.Sprintf("run-%d", i)})
					if err == nil && out.Output != fmt.Sprintf("y(x(%d))+z(x(%d))", i, i) {
						err = fmt.Errorf("output %q", out.Output)
					}
					errs[i] = err
				})
			}
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Errorf("run %d: %v", i, err)
				}
			}
			e.settle(t)
			for _, s := range []*scripted{x, y, z} {
				if n := s.calls.Load(); n != runs {
					t.Errorf("%s ran %d times for %d runs", s.agent.Name(), n, runs)
				}
			}
			st := fs.Stats()
			if st.Fails+st.LostReplies+st.Conflicts+st.ConcurrentWrites == 0 {
				t.Errorf("no fault was injected: %+v", st)
			}
		})
	}
}
