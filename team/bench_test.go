package team_test

import (
	"context"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	storemem "github.com/calf-go/calf/store/memory"
	"github.com/calf-go/calf/team"
)

// BenchmarkTeams measures a team run end to end on the memory broker and
// store, with members whose model answers at once: the cost of the
// coordination, per team run.
func BenchmarkTeams(b *testing.B) {
	for _, tc := range []struct {
		name  string
		build func(ms []team.Member) *team.Team
	}{
		{"sequential-3", func(ms []team.Member) *team.Team { return team.Must(team.NewSequential("t", ms, nil)) }},
		{"concurrent-3", func(ms []team.Member) *team.Team {
			return team.Must(team.NewConcurrent("t", ms, team.AggregateFunc(func(_ context.Context, _ string, as []team.Turn) (string, error) {
				return as[0].Content, nil
			}), nil))
		}},
		{"groupchat-3-rounds", func(ms []team.Member) *team.Team {
			return team.Must(team.NewGroupChat("t", ms, team.RoundRobin(), &team.Options{MaxRounds: 3}))
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			mb := memory.New(&memory.Options{Backoff: func(int) time.Duration { return time.Millisecond }})
			defer mb.Close()
			c := calf.NewClient(mb, nil)
			defer c.Close()
			rt := agent.NewRuntime(c, storemem.New(), nil)
			m := modeltest.FunctionModel(func(context.Context, *model.Request) (*model.Response, error) {
				return modeltest.Text("ok"), nil
			})
			var ms []team.Member
			for _, name := range []string{"a", "b", "c"} {
				a := agent.Must(agent.New(name, m, nil))
				if err := a.Serve(b.Context(), rt, nil); err != nil {
					b.Fatal(err)
				}
				ms = append(ms, team.AgentMember(a))
			}
			tm := tc.build(ms)
			if err := tm.Serve(b.Context(), rt, nil); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := tm.Run(b.Context(), rt, "go", nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
