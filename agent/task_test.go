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
	if task.Definition().Name != agent.DefaultTaskToolName {
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
