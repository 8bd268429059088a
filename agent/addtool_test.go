package agent_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/local"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/tool"
)

// A tool added once the agent is served is refused, whether Serve or a
// first Run on a runtime that serves on demand served it, and the agent's runs go on with the
// tools it was served with: no run waits for a call no one handles.
func TestAddToolAfterServe(t *testing.T) {
	late := tool.Must(tool.New("late", "A tool added late.", func(context.Context, struct{}) (string, error) { return "late ran", nil }))
	// The model calls late when it is offered, and answers with what it got.
	m := modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
		if last := req.Messages[len(req.Messages)-1]; last.Role == model.RoleTool {
			return modeltest.Text(last.Text()), nil
		}
		if slices.ContainsFunc(req.Tools, func(d model.ToolDefinition) bool { return d.Name == "late" }) {
			return modeltest.ToolCalls(modeltest.Call("c1", "late", `{}`)), nil
		}
		return modeltest.Text("no late tool"), nil
	})
	for _, tt := range []struct {
		name, agent string
		serve       func(t *testing.T, a *agent.Agent[string]) *agent.Runtime
	}{
		{"Serve", "late_served", func(t *testing.T, a *agent.Agent[string]) *agent.Runtime {
			e := newEnv(t, nil)
			serve(t, e, a)
			return e.rt
		}},
		{"a first Run on a runtime that serves on demand", "late_on_demand", func(t *testing.T, a *agent.Agent[string]) *agent.Runtime {
			rt := local.Runtime()
			if _, err := a.Run(runCtx(t), rt, "first", nil); err != nil {
				t.Fatal(err)
			}
			return rt
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := agent.Must(agent.New(tt.agent, m, nil))
			rt := tt.serve(t, a)
			if err := a.AddTool(late); !errors.Is(err, agent.ErrAlreadyServed) {
				t.Fatalf("AddTool after serving: %v; want ErrAlreadyServed", err)
			}
			if err := a.AddSubagent(agent.Named("helper", "Helps."), nil); !errors.Is(err, agent.ErrAlreadyServed) {
				t.Fatalf("AddSubagent after serving: %v; want ErrAlreadyServed", err)
			}
			if defs := a.Tools(); len(defs) != 0 {
				t.Errorf("tools after the refusals: %v", defs)
			}
			out, err := a.Run(runCtx(t), rt, "go", nil)
			if err != nil || out.Output != "no late tool" {
				t.Errorf("run: %+v, %v", out, err)
			}
		})
	}
	// Before serving, the tool is added, offered and its calls handled.
	e := newEnv(t, nil)
	a := agent.Must(agent.New("early", m, nil))
	if err := a.AddTool(late); err != nil {
		t.Fatal(err)
	}
	serve(t, e, a)
	if out, err := a.Run(runCtx(t), e.rt, "go", nil); err != nil || out.Output != "late ran" {
		t.Errorf("run with the tool added before Serve: %+v, %v", out, err)
	}
}
