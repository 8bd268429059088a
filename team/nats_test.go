package team_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/broker/nats"
	"github.com/calf-go/calf/broker/nats/embedded"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	storemem "github.com/calf-go/calf/store/memory"
	"github.com/calf-go/calf/team"
	"github.com/calf-go/calf/tool"
)

// Teams on a network broker (NATS JetStream, embedded): runs complete, and
// RunStream, which observes every agent channel in a private
// subscription, yields the members' events in causal order.
func TestTeamsOnNATS(t *testing.T) {
	b, err := embedded.Open(t.Context(), t.TempDir(), &nats.Options{Backoff: func(int) time.Duration { return time.Millisecond }})
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
	// The stream promises each run's own order and causal order, not an
	// order across runs: y and z run in parallel, and the panel's reply
	// is caused by the reply of whichever of them answered last, so the
	// other's output may come after it (its channel's subscription behind
	// the team channels'). The team's output comes last, after the
	// outputs of every run it started.
	want := []string{"1 x output", "1 x done", "2 y output", "2 z output", "2 panel done", `output "y(x(go))+z(x(go))"`}
	if diff := cmp.Diff(want, got, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	at := func(e string) int { return slices.Index(got, e) }
	if at("1 x output") != 0 || at("1 x done") != 1 || at(want[5]) != 5 {
		t.Errorf("events out of causal order: %q", got)
	}
	if done := at("2 panel done"); done < at("2 y output") && done < at("2 z output") {
		t.Errorf("the panel's reply before the outputs of both its members: %q", got)
	}
}

// A team stream yields each member step's deltas before the step's tool
// call and before the member's output, on the memory broker and on NATS,
// run after run.
func TestTeamStreamYieldsDeltasBeforeWhatFollows(t *testing.T) {
	const runs = 15
	brokers := []struct {
		name string
		open func(t *testing.T) calf.Broker
	}{
		{"memory", func(*testing.T) calf.Broker { return memory.New(nil) }},
		{"nats", func(t *testing.T) calf.Broker {
			b, err := embedded.Open(t.Context(), t.TempDir(), nil)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}},
	}
	for _, bt := range brokers {
		t.Run(bt.name, func(t *testing.T) {
			b := bt.open(t)
			t.Cleanup(func() { _ = b.Close() })
			c := calf.NewClient(b, nil)
			t.Cleanup(func() { _ = c.Close() })
			e := &env{rt: agent.NewRuntime(c, storemem.New(), nil)}
			var steps []modeltest.Step
			for range runs {
				first := modeltest.ToolCalls(modeltest.Call("call_1", "note", `{"text":"x"}`))
				first.Message.Parts = []model.Part{model.TextPart("Let me write that down in my notes first.")}
				steps = append(steps, first, modeltest.Text("It is written down now."))
			}
			note := tool.Must(tool.New("note", "Write a note.", func(_ context.Context, in struct {
				Text string `json:"text"`
			}) (string, error) {
				return "noted", nil
			}))
			writer := agent.Must(agent.New("writer", modeltest.NewTestModel(steps...), &agent.Options{Tools: []tool.Tool{note}}))
			if err := writer.Serve(t.Context(), e.rt, nil); err != nil {
				t.Fatal(err)
			}
			seq := serve(t, e, team.Must(team.NewSequential("scribes", []team.Member{team.AgentMember(writer)}, nil)))
			for i := range runs {
				var kinds []string
				for ev, err := range seq.RunStream(runCtx(t), e.rt, "write it down", nil) {
					if err != nil {
						t.Fatalf("run %d: %v", i, err)
					}
					if ev.Kind == team.EventMember && ev.Agent.Kind != "" {
						kinds = append(kinds, fmt.Sprintf("%s%d", ev.Agent.Kind, ev.Agent.Step))
					}
				}
				got := strings.Join(kinds, " ")
				// Nine words and the call's three deltas, then four words.
				want := "input0 inference1 " + strings.Repeat("delta1 ", 12) + "tool_call1 tool_result1 inference2 " +
					strings.Repeat("delta2 ", 5) + "output2"
				if got != want {
					t.Errorf("run %d: member events\n got %s\nwant %s", i, got, want)
				}
			}
		})
	}
}
