package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/tool"
)

// The task tool hands an ad-hoc task to a general-purpose subagent: its
// prompt starts with the task's description, it runs with its own turn
// budget, and its answer is the tool's result.
func TestTaskTool(t *testing.T) {
	e := newEnv(t, nil)
	var childCalls, parentCalls atomic.Int64
	var prompt atomic.Value
	serve(t, e, agent.Must(agent.New("worker", counted(&childCalls, func(_ context.Context, req *model.Request) (*model.Response, error) {
		prompt.Store(req.Messages[len(req.Messages)-1].Text())
		return modeltest.Text("the files are tidy"), nil
	}), &agent.Options{Instructions: "You carry out one task for another agent."})))
	task, err := agent.AsTask(agent.Named("worker", ""), &agent.SubagentOptions{MaxTurns: 3})
	if err != nil {
		t.Fatal(err)
	}
	if task.Definition().Name != "task" {
		t.Errorf("tool name %q", task.Definition().Name)
	}
	var params struct {
		Required []string `json:"required"`
	}
	if err := json.Unmarshal(task.Definition().Parameters, &params); err != nil || strings.Join(params.Required, ",") != "description,prompt" {
		t.Errorf("parameters %s: %v", task.Definition().Parameters, err)
	}
	m := agent.Must(agent.New("lead", counted(&parentCalls, func(_ context.Context, req *model.Request) (*model.Response, error) {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == model.RoleTool {
			return modeltest.Text("Done: " + last.Text()), nil
		}
		return modeltest.ToolCalls(modeltest.Call("call_1", "task", `{"description":"tidy up","prompt":"Sort the files in ./in by date."}`)), nil
	}), &agent.Options{Tools: []tool.Tool{task}}))
	serve(t, e, m)
	out, err := m.Run(runCtx(t), e.rt, "tidy the files", &agent.RunOptions{RunID: "t1"})
	if err != nil {
		t.Fatal(err)
	}
	if out.Output != "Done: the files are tidy" {
		t.Errorf("output %q", out.Output)
	}
	if got := prompt.Load(); got != "Task: tidy up\n\nSort the files in ./in by date." {
		t.Errorf("the subagent's prompt: %q", got)
	}
	child, err := e.rt.LoadState(t.Context(), agent.SubagentRunID("t1", "call_1"))
	if err != nil {
		t.Fatal(err)
	}
	if child.Agent != "worker" || child.Parent != "t1" || child.MaxTurns != 3 {
		t.Errorf("child run: agent %s, parent %q, max turns %d", child.Agent, child.Parent, child.MaxTurns)
	}

	// Missing or empty arguments are refused before any run starts.
	for _, args := range []string{`{"prompt":"x"}`, `{"description":" ","prompt":"x"}`, `{"input":"x"}`} {
		var ae *tool.ArgumentError
		if _, err := task.Call(t.Context(), json.RawMessage(args)); !errors.As(err, &ae) {
			t.Errorf("task called with %s: %v, want an argument error", args, err)
		}
	}
}

// The task tool made by AsTaskAmong lets the model choose the subagent:
// its schema enumerates their names, its description lists them, the
// chosen one runs as a child run, and an unknown name is an error result
// that names the choices, with no run started.
func TestTaskToolAmong(t *testing.T) {
	e := newEnv(t, nil)
	var calls [3]atomic.Int64
	names := []string{"alpha", "beta", "gamma"}
	subs := make([]agent.Target, len(names))
	for i, name := range names {
		serve(t, e, agent.Must(agent.New(name, counted(&calls[i], func(_ context.Context, req *model.Request) (*model.Response, error) {
			return modeltest.Text(name + " did: " + req.Messages[len(req.Messages)-1].Text()), nil
		}), nil)))
		subs[i] = agent.Named(name, "the "+name+" specialist")
	}
	task, err := agent.AsTaskAmong(subs, &agent.SubagentOptions{MaxTurns: 2})
	if err != nil {
		t.Fatal(err)
	}
	def := task.Definition()
	for _, name := range names {
		if !strings.Contains(def.Description, "- "+name+": the "+name+" specialist") {
			t.Errorf("the description does not list %s: %q", name, def.Description)
		}
	}
	var params struct {
		Properties struct {
			Subagent struct {
				Enum []string `json:"enum"`
			} `json:"subagent"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	if err := json.Unmarshal(def.Parameters, &params); err != nil {
		t.Fatal(err)
	}
	if strings.Join(params.Properties.Subagent.Enum, ",") != "alpha,beta,gamma" || strings.Join(params.Required, ",") != "subagent,description,prompt" {
		t.Errorf("parameters %s", def.Parameters)
	}

	lead := func(choice string) *agent.Agent[string] {
		return agent.Must(agent.New("lead_"+choice, modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
			last := req.Messages[len(req.Messages)-1]
			if last.Role == model.RoleTool {
				return modeltest.Text("Done: " + last.Text()), nil
			}
			return modeltest.ToolCalls(modeltest.Call("call_1", "task", `{"subagent":"`+choice+`","description":"sort","prompt":"Sort the list."}`)), nil
		}), &agent.Options{Tools: []tool.Tool{task}}))
	}

	m := serve(t, e, lead("beta"))
	out, err := m.Run(runCtx(t), e.rt, "sort it", &agent.RunOptions{RunID: "p1"})
	if err != nil {
		t.Fatal(err)
	}
	if out.Output != "Done: beta did: Task: sort\n\nSort the list." {
		t.Errorf("output %q", out.Output)
	}
	if calls[0].Load() != 0 || calls[1].Load() != 1 || calls[2].Load() != 0 {
		t.Errorf("model calls of alpha, beta, gamma: %d, %d, %d; want 0, 1, 0", calls[0].Load(), calls[1].Load(), calls[2].Load())
	}
	child, err := e.rt.LoadState(t.Context(), agent.SubagentRunID("p1", "call_1"))
	if err != nil {
		t.Fatal(err)
	}
	if child.Agent != "beta" || child.Parent != "p1" || child.MaxTurns != 2 {
		t.Errorf("child run: agent %s, parent %q, max turns %d", child.Agent, child.Parent, child.MaxTurns)
	}

	// The stream's subagent events name the subagent chosen.
	var spawned, completed string
	for ev, err := range serve(t, e, lead("gamma")).RunStream(runCtx(t), e.rt, "sort it", &agent.RunOptions{RunID: "p3"}) {
		if err != nil {
			t.Fatal(err)
		}
		switch ev.Kind {
		case agent.EventSubagentSpawned:
			spawned = ev.Subagent.Agent
		case agent.EventSubagentCompleted:
			completed = ev.Output.Agent
		}
	}
	if spawned != "gamma" || completed != "gamma" || calls[2].Load() != 1 {
		t.Errorf("subagent spawned %q, completed %q, gamma's model calls %d", spawned, completed, calls[2].Load())
	}

	// An unknown name goes back to the model as an error result that
	// lists the subagents; no subagent runs.
	m = serve(t, e, lead("delta"))
	out, err = m.Run(runCtx(t), e.rt, "sort it", &agent.RunOptions{RunID: "p2"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.Output, "Done: invalid arguments") || !strings.Contains(out.Output, "delta") || !strings.Contains(out.Output, "alpha beta gamma") {
		t.Errorf("output %q, want the error result naming delta and the choices", out.Output)
	}
	var ae *tool.ArgumentError
	if _, err := task.Call(t.Context(), json.RawMessage(`{"subagent":"delta","description":"d","prompt":"p"}`)); !errors.As(err, &ae) || !strings.Contains(err.Error(), "delta") {
		t.Errorf("called directly with an unknown name: %v", err)
	}
	if calls[0].Load()+calls[1].Load()+calls[2].Load() != 2 {
		t.Errorf("a subagent ran for an unknown name")
	}
	if _, err := e.rt.LoadState(t.Context(), agent.SubagentRunID("p2", "call_1")); err == nil {
		t.Errorf("a child run exists for an unknown name")
	}

	// Bad construction is refused.
	for _, bad := range [][]agent.Target{nil, {agent.Named("alpha", ""), agent.Named("alpha", "")}, {agent.Named("no such name!", "")}} {
		if _, err := agent.AsTaskAmong(bad, nil); !errors.Is(err, agent.ErrInvalidAgent) {
			t.Errorf("AsTaskAmong(%v): %v, want ErrInvalidAgent", bad, err)
		}
	}
}
