package agent_test

import (
	"context"
	"encoding/json"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/agent/approval"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/tool"
)

// callingAgent is a custom agent whose step asks the model, runs the tool
// "add" with the arguments it answered, and returns the tool's result.
// With ask, it asks a person to approve the call first, and returns
// "denied: {message}" when denied.
func callingAgent(t *testing.T, rt *agent.Runtime, ask bool, steps, modelCalls, toolRuns *atomic.Int64, waiting chan<- struct{}) *agent.Custom[struct{}, string] {
	t.Helper()
	m := modeltest.FunctionModel(func(ctx context.Context, req *model.Request) (*model.Response, error) {
		modelCalls.Add(1)
		return &model.Response{
			Message: model.AssistantMessage(`{"a":2,"b":3}`),
			Usage:   model.Usage{InputTokens: 10, OutputTokens: 4},
		}, nil
	})
	add, err := tool.New("add", "Adds a and b.", func(ctx context.Context, in addArgs) (int, error) {
		rc, _ := agent.FromContext(ctx)
		toolRuns.Add(1)
		if err := rc.EmitEvent("adding", in); err != nil {
			return 0, err
		}
		return in.A + in.B, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	c, err := agent.NewCustom("caller", func(sc *agent.StepContext[struct{}], in []model.Message) (string, error) {
		steps.Add(1)
		resp, err := sc.Generate(m, &model.Request{Messages: in})
		if err != nil {
			return "", err
		}
		args := json.RawMessage(resp.Message.Text())
		if ask {
			a, err := sc.Approve("add", args, "adding needs a person")
			if err != nil {
				if waiting != nil {
					waiting <- struct{}{}
				}
				return "", err
			}
			if a.Status != approval.Approved {
				return "denied: " + a.Message, nil
			}
		}
		res, err := sc.CallTool(add, args)
		if err != nil {
			return "", err
		}
		return res.Text(), nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Serve(t.Context(), rt, nil); err != nil {
		t.Fatal(err)
	}
	return c
}

// streamRun runs c in RunStream and returns the custom events' types in
// the order yielded, and the run's output.
func streamRun(t *testing.T, c *agent.Custom[struct{}, string], rt *agent.Runtime, id string) ([]string, *agent.OutputEvent, error) {
	var types []string
	var out *agent.OutputEvent
	for ev, err := range c.RunStream(runCtx(t), rt, "add 2 and 3", &agent.RunOptions{RunID: id}) {
		if err != nil {
			return types, out, err
		}
		switch ev.Kind {
		case agent.EventCustom:
			types = append(types, ev.Custom.Type)
		case agent.EventOutput:
			out = ev.Output
		}
	}
	return types, out, nil
}

// A custom step calls a model and a tool: RunStream yields the model's
// response, the tool call, the tool's own event and its result, in order;
// the model's usage counts in the run's; and a step run again after the
// process stopped past its calls gets their recorded answers: the model is
// called once and the tool runs once.
func TestCustomStepGeneratesAndCallsTools(t *testing.T) {
	e := newEnv(t, nil)
	fs := &failRunWrite{Store: e.store, after: agent.KindCustomCall}
	worker := agent.NewRuntime(e.client, fs, nil)
	var steps, modelCalls, toolRuns atomic.Int64
	c := callingAgent(t, worker, false, &steps, &modelCalls, &toolRuns, nil)
	types, out, err := streamRun(t, c, e.rt, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if !fs.tripped {
		t.Fatal("the fault was not injected")
	}
	e.settle(t)
	if steps.Load() != 2 || modelCalls.Load() != 1 || toolRuns.Load() != 1 {
		t.Errorf("steps %d, model calls %d, tool runs %d; want 2, 1, 1", steps.Load(), modelCalls.Load(), toolRuns.Load())
	}
	// The step that ran again emitted the same ids; a broker that keeps
	// repeated ids delivers them again.
	if want := []string{"model_response", "tool_call", "adding", "tool_result"}; !slices.Equal(dedupe(types), want) {
		t.Errorf("custom events %v; want %v", types, want)
	}
	if out == nil || string(out.Content) != `"5"` {
		t.Fatalf("output %+v", out)
	}
	info, err := e.rt.LoadAgentRun(t.Context(), "r1")
	if err != nil {
		t.Fatal(err)
	}
	if info.Usage.InputTokens != 10 || info.Usage.OutputTokens != 4 || info.Usage.Requests != 1 {
		t.Errorf("run usage %+v; want the model call's, once", info.Usage)
	}
	// The calls' records go with the run when it is swept.
	ctx := t.Context()
	if recs, err := e.store.List(ctx, agent.KindCustomCall, "r1/", "", 10); err != nil || len(recs) != 2 {
		t.Fatalf("call records %d, %v; want 2", len(recs), err)
	}
	if _, err := e.rt.Sweep(ctx, agent.SweepOptions{Before: info.EndedAt.Add(time.Second)}); err != nil {
		t.Fatal(err)
	}
	if recs, err := e.store.List(ctx, agent.KindCustomCall, "r1/", "", 10); err != nil || len(recs) != 0 {
		t.Errorf("call records after the sweep %d, %v; want none", len(recs), err)
	}
}

// dedupe keeps the first of each value, in order.
func dedupe(s []string) []string {
	var out []string
	for _, v := range s {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// A custom step asks a person: the run waits, running, with the request
// pending in approval.List; an answer recorded in the store only (no
// client: the runtime on the in-process broker reads it) runs the step
// again, which replays its model call and goes the way of the answer.
func TestCustomStepApproval(t *testing.T) {
	for _, approve := range []bool{true, false} {
		t.Run(map[bool]string{true: "approved", false: "denied"}[approve], func(t *testing.T) {
			e := newEnv(t, nil)
			var steps, modelCalls, toolRuns atomic.Int64
			waiting := make(chan struct{}, 4)
			c := callingAgent(t, e.rt, true, &steps, &modelCalls, &toolRuns, waiting)
			type result struct {
				types []string
				out   *agent.OutputEvent
				err   error
			}
			done := make(chan result, 1)
			go func() {
				types, out, err := streamRun(t, c, e.rt, "r1")
				done <- result{types, out, err}
			}()
			<-waiting
			ctx := t.Context()
			reqs, err := approval.List(ctx, e.rt.Store(), "r1", approval.Pending)
			if err != nil || len(reqs) != 1 {
				t.Fatalf("pending requests %+v, %v", reqs, err)
			}
			req := reqs[0]
			if req.ID != approval.ID("r1", "custom-1-2") || req.ToolName != "add" || string(req.Arguments) != `{"a":2,"b":3}` || req.Reason != "adding needs a person" {
				t.Errorf("request %+v", req)
			}
			info, err := e.rt.LoadAgentRun(ctx, "r1")
			if err != nil || info.Status != agent.RunRunning {
				t.Fatalf("waiting run %+v, %v", info, err)
			}
			if toolRuns.Load() != 0 {
				t.Fatal("the tool ran before the approval")
			}
			if _, err := approval.Respond(ctx, e.rt.Store(), nil, req.ID, approval.Answer{Approve: approve, Message: "not now", Digest: req.Digest}); err != nil {
				t.Fatal(err)
			}
			r := <-done
			if r.err != nil {
				t.Fatal(r.err)
			}
			want, wantTypes, wantRuns := `"5"`, []string{"model_response", "tool_call", "adding", "tool_result"}, int64(1)
			if !approve {
				want, wantTypes, wantRuns = `"denied: not now"`, []string{"model_response"}, 0
			}
			if r.out == nil || string(r.out.Content) != want {
				t.Fatalf("output %+v; want %s", r.out, want)
			}
			if got := dedupe(r.types); !slices.Equal(got, wantTypes) {
				t.Errorf("custom events %v; want %v", got, wantTypes)
			}
			e.settle(t)
			if steps.Load() != 2 || modelCalls.Load() != 1 || toolRuns.Load() != wantRuns {
				t.Errorf("steps %d, model calls %d, tool runs %d; want 2, 1, %d", steps.Load(), modelCalls.Load(), toolRuns.Load(), wantRuns)
			}
			got, err := approval.Get(ctx, e.rt.Store(), req.ID)
			if err != nil || (got.Status == approval.Approved) != approve {
				t.Errorf("request after the run: %+v, %v", got, err)
			}
			info, err = e.rt.LoadAgentRun(ctx, "r1")
			if err != nil || info.Usage.Requests != 1 {
				t.Errorf("run usage %+v, %v; want one model call", info.Usage, err)
			}
		})
	}
}
