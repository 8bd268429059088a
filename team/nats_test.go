package team_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/nats"
	storemem "github.com/calf-go/calf/store/memory"
	"github.com/calf-go/calf/team"
)

// Teams on a network broker (NATS JetStream, embedded): runs complete, and
// RunStream, which observes every agent channel in a private
// subscription, yields the members' events in causal order.
func TestTeamsOnNATS(t *testing.T) {
	b, err := nats.OpenEmbedded(t.Context(), t.TempDir(), &nats.Options{Backoff: func(int) time.Duration { return time.Millisecond }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	c := calf.NewClient(b, nil)
	t.Cleanup(func() { _ = c.Close() })
	e := &env{rt: agent.NewRuntime(c, storemem.New(), nil)}
	x, y, z := wrapper(t, e, "x"), wrapper(t, e, "y"), wrapper(t, e, "z")
	agg := team.AggregateFunc(func(_ context.Context, _ string, as []team.Turn) (string, error) {
		return as[0].Content + "+" + as[1].Content, nil
	})
	panel := serve(t, e, team.Must(team.NewConcurrent("panel", members(y, z), agg, nil)))
	seq := serve(t, e, team.Must(team.NewSequential("seq", []team.Member{team.AgentMember(x.agent), panel}, nil)))

	out, err := seq.Run(runCtx(t), e.rt, "go", nil)
	if err != nil || out.Output != "y(x(go))+z(x(go))" {
		t.Fatalf("run: %+v, %v", out, err)
	}

	var got []string
	for ev, err := range seq.RunStream(runCtx(t), e.rt, "go", nil) {
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case ev.Kind == team.EventMember && ev.Agent.Kind == agent.EventOutput:
			got = append(got, fmt.Sprintf("%d %s output", ev.Step, ev.Agent.Agent))
		case ev.Kind == team.EventMemberDone && ev.Message.Channel == team.MemberDoneChannel("seq"):
			got = append(got, fmt.Sprintf("%d %s done", ev.Step, ev.Member))
		case ev.Kind == team.EventOutput:
			got = append(got, "output "+string(ev.Output.Content))
		}
	}
	// y and z run in parallel: their order varies.
	if len(got) == 6 && got[2] > got[3] {
		got[2], got[3] = got[3], got[2]
	}
	want := []string{"1 x output", "1 x done", "2 y output", "2 z output", "2 panel done", `output "y(x(go))+z(x(go))"`}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}
