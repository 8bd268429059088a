package agent_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/tool"
)

// A model that gives the same tool call id at every step (some servers
// number calls per response) still gets a subagent run per call.
func TestSubagentCallIDReusedAcrossSteps(t *testing.T) {
	e := newEnv(t, nil)
	var childCalls, parentCalls atomic.Int64
	serve(t, e, agent.Must(agent.New("researcher", counted(&childCalls, func(_ context.Context, req *model.Request) (*model.Response, error) {
		return modeltest.Text("answer to " + req.Messages[len(req.Messages)-1].Text()), nil
	}), nil)))
	m := agent.Must(agent.New("manager", counted(&parentCalls, func(_ context.Context, req *model.Request) (*model.Response, error) {
		var results []string
		for _, msg := range req.Messages {
			if msg.Role == model.RoleTool {
				results = append(results, msg.Text())
			}
		}
		switch len(results) {
		case 0:
			return modeltest.ToolCalls(modeltest.Call("call_0", "researcher", `{"input":"one"}`)), nil
		case 1:
			return modeltest.ToolCalls(modeltest.Call("call_0", "researcher", `{"input":"two"}`)), nil
		}
		return modeltest.Text(results[0] + "; " + results[1]), nil
	}), nil))
	if err := m.AddSubagent(agent.Named("researcher", ""), nil); err != nil {
		t.Fatal(err)
	}
	serve(t, e, m)
	out, err := m.Run(runCtx(t), e.rt, "ask twice", nil)
	if err != nil {
		t.Fatal(err)
	}
	if out.Output != "answer to one; answer to two" || childCalls.Load() != 2 {
		t.Errorf("output %q after %d subagent model calls", out.Output, childCalls.Load())
	}
}

// The same holds for ordinary tools: a reused call id is renamed, so that
// the second call is executed rather than answered with the first's
// recorded result.
func TestToolCallIDReusedAcrossSteps(t *testing.T) {
	e := newEnv(t, nil)
	add, executions := addTool(t)
	m := agent.Must(agent.New("adder", modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
		var results []string
		for _, msg := range req.Messages {
			if msg.Role == model.RoleTool {
				results = append(results, msg.Text())
			}
		}
		switch len(results) {
		case 0:
			return modeltest.ToolCalls(modeltest.Call("0", "add", `{"a":1,"b":2}`)), nil
		case 1:
			return modeltest.ToolCalls(modeltest.Call("0", "add", `{"a":3,"b":4}`)), nil
		}
		return modeltest.Text(results[0] + " and " + results[1]), nil
	}), &agent.Options{Tools: []tool.Tool{add}}))
	serve(t, e, m)
	out, err := m.Run(runCtx(t), e.rt, "add twice", nil)
	if err != nil {
		t.Fatal(err)
	}
	if out.Output != "3 and 7" || executions.Load() != 2 || out.ToolCalls[1].ID == out.ToolCalls[0].ID {
		t.Errorf("output %q, %d executions, calls %+v", out.Output, executions.Load(), out.ToolCalls)
	}
}
