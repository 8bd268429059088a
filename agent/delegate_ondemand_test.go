package agent_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/local"
	"github.com/calf-go/calf/model/modeltest"
	storemem "github.com/calf-go/calf/store/memory"
	"github.com/calf-go/calf/tool"
)

// On the quick path (local.New, no Serve), every kind of delegation
// reaches its target: the runtime serves with an agent the agents its
// runs may delegate to, and theirs. Before, the target's model was never
// called and the run waited until its timeout.
func TestQuickPathServesDelegates(t *testing.T) {
	cases := []struct {
		name string
		// parent returns the agent to run, with leaf as the target; the
		// parent's model calls the tool named call with args.
		tool func(leaf agent.Target) (tool.Tool, error)
		call string
		args string
	}{
		{"handoff", func(leaf agent.Target) (tool.Tool, error) { return agent.Handoff(leaf, nil) }, "transfer_to_leaf", `{}`},
		{"as_tool", func(leaf agent.Target) (tool.Tool, error) { return agent.AsTool(leaf, nil) }, "leaf", `{"input":"do it"}`},
		{"as_task", func(leaf agent.Target) (tool.Tool, error) { return agent.AsTask(leaf, nil) }, "task", `{"description":"d","prompt":"do it"}`},
		{"as_task_among", func(leaf agent.Target) (tool.Tool, error) {
			return agent.AsTaskAmong([]agent.Target{agent.Named("other", "another"), leaf}, nil)
		}, "task", `{"subagent":"leaf","description":"d","prompt":"do it"}`},
		{"add_subagent", nil, "leaf", `{"input":"do it"}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rt := local.New(nil)
			t.Cleanup(func() { _ = rt.Client().Broker().Close() })
			// leaf hands off to deep, which only the walk through leaf's
			// tools reaches: delegates of delegates are served too.
			deepModel := modeltest.NewTestModel(modeltest.Text("from deep"))
			deep := agent.Must(agent.NewText("deep", deepModel, ""))
			toDeep := tool.Must(agent.Handoff(deep, nil))
			leafModel := modeltest.NewTestModel(modeltest.ToolCalls(modeltest.Call("h", "transfer_to_deep", `{}`)))
			leaf := agent.Must(agent.NewText("leaf", leafModel, "", toDeep))
			parentModel := modeltest.NewTestModel(modeltest.ToolCalls(modeltest.Call("c1", c.call, c.args)), modeltest.Text("parent done"))
			parent := agent.Must(agent.NewText("parent", parentModel, ""))
			if c.tool == nil {
				if err := parent.AddSubagent(leaf, nil); err != nil {
					t.Fatal(err)
				}
			} else {
				tl, err := c.tool(leaf)
				if err != nil {
					t.Fatal(err)
				}
				if err := parent.AddTool(tl); err != nil {
					t.Fatal(err)
				}
			}
			ctx := runCtx(t)
			out, err := parent.Run(ctx, rt, "hi", nil)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			want := "parent done"
			if c.name == "handoff" {
				want = "from deep" // the chain's last run answers
			}
			if out.Output != want {
				t.Errorf("output %q, want %q", out.Output, want)
			}
			if n := len(leafModel.Requests()); n != 1 {
				t.Errorf("the target's model got %d requests, want 1", n)
			}
			if n := len(deepModel.Requests()); n != 1 {
				t.Errorf("the target's own handoff target's model got %d requests, want 1", n)
			}
		})
	}
}

// Serve on a runtime that serves on demand serves the agent's delegates
// too: a program that serves its entry agent itself gets the rest.
func TestServeOnDemandRuntimeServesDelegates(t *testing.T) {
	rt := local.New(nil)
	t.Cleanup(func() { _ = rt.Client().Broker().Close() })
	leafModel := modeltest.NewTestModel(modeltest.Text("leaf answer"))
	leaf := agent.Must(agent.NewText("leaf", leafModel, ""))
	parent := agent.Must(agent.NewText("parent", modeltest.NewTestModel(
		modeltest.ToolCalls(modeltest.Call("c1", "leaf", `{"input":"x"}`)), modeltest.Text("done")), ""))
	if err := parent.AddSubagent(leaf, nil); err != nil {
		t.Fatal(err)
	}
	ctx := runCtx(t)
	if err := parent.Serve(ctx, rt, nil); err != nil {
		t.Fatal(err)
	}
	if out, err := parent.Run(ctx, rt, "hi", nil); err != nil || out.Output != "done" {
		t.Fatalf("Run: %+v, %v", out, err)
	}
	if n := len(leafModel.Requests()); n != 1 {
		t.Errorf("the subagent's model got %d requests, want 1", n)
	}
}

// On a runtime that does not serve on demand, a run whose child run's
// agent no process serves fails fast with ErrNotServed naming the child,
// for a subagent and for a handoff, rather than waiting in silence until
// its timeout.
func TestChildRunNotServedFailsFast(t *testing.T) {
	cases := []struct {
		name string
		tool func() (tool.Tool, error)
		call string
		args string
	}{
		{"subagent", func() (tool.Tool, error) { return agent.AsTool(agent.Named("absent", "served nowhere"), nil) }, "absent", `{"input":"x"}`},
		{"handoff", func() (tool.Tool, error) { return agent.Handoff(agent.Named("absent", "served nowhere"), nil) }, "transfer_to_absent", `{}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := memory.New(nil)
			t.Cleanup(func() { _ = b.Close() })
			rt := agent.NewRuntime(calf.NewClient(b, nil), storemem.New(), nil)
			tl, err := c.tool()
			if err != nil {
				t.Fatal(err)
			}
			m := modeltest.NewTestModel(modeltest.ToolCalls(modeltest.Call("c1", c.call, c.args)), modeltest.Text("should not come"))
			parent := agent.Must(agent.NewText("parent", m, "", tl))
			ctx := runCtx(t)
			if err := parent.Serve(ctx, rt, nil); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			out, err := parent.Run(ctx, rt, "hi", nil)
			if err == nil {
				t.Fatalf("Run: %+v, want an error", out)
			}
			if elapsed := time.Since(start); elapsed > 10*time.Second {
				t.Errorf("the run failed after %s, want within the start timeout", elapsed)
			}
			if !errors.Is(err, agent.ErrNotServed) {
				t.Errorf("Run: %v, want ErrNotServed", err)
			}
			if !strings.Contains(err.Error(), "absent") || !strings.Contains(err.Error(), "calf worker") {
				t.Errorf("the error %q does not name the child's agent and what to do", err)
			}
			if n := len(m.Requests()); n != 1 {
				t.Errorf("the parent's model got %d requests, want 1: a child nobody serves is not the model's to mend", n)
			}
		})
	}
}
