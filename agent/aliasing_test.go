package agent_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/agent/session"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/tool"
)

// What the runtime hands a caller (a run's output, a loaded run or
// session, the state Cancel returns) is the caller's to change: changing
// it in place, as a caller redacting a conversation before logging it
// would, changes neither what the next turn of the session sends to the
// model nor what the runtime returns next, although this process keeps
// the runs and sessions it ran in memory.
func TestCallersChangesStayTheirs(t *testing.T) {
	e := newEnv(t, nil)
	var mu sync.Mutex
	var requests []string
	m := modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
		var b strings.Builder
		for _, msg := range req.Messages {
			b.WriteString(string(msg.Role) + ":" + msg.Text() + "|")
		}
		mu.Lock()
		requests = append(requests, b.String())
		mu.Unlock()
		last := req.Messages[len(req.Messages)-1]
		if last.Role == model.RoleTool {
			return modeltest.Text("The sum is " + last.Text()), nil
		}
		if strings.Contains(last.Text(), "add") {
			return modeltest.ToolCalls(modeltest.Call("call_1", "add", `{"a":2,"b":3}`)), nil
		}
		return modeltest.Text("ok"), nil
	})
	add, _ := addTool(t)
	a := agent.Must(agent.New("calculator", m, &agent.Options{Tools: []tool.Tool{add}}))
	if err := a.Serve(t.Context(), e.rt, nil); err != nil {
		t.Fatal(err)
	}
	ctx := runCtx(t)
	opts := &agent.RunOptions{SessionID: "s"}
	out, err := a.Run(ctx, e.rt, "add 2 and 3", opts)
	if err != nil {
		t.Fatal(err)
	}
	redact := func(msgs []model.Message) {
		for i := range msgs {
			for j := range msgs[i].Parts {
				msgs[i].Parts[j].Text = "REDACTED"
			}
			for j := range msgs[i].ToolCalls {
				msgs[i].ToolCalls[j].Arguments = "{}"
			}
		}
	}
	redact(out.Thread)
	for i := range out.ToolCalls {
		out.ToolCalls[i].Result.Parts[0].Text = "REDACTED"
	}
	st, err := e.rt.LoadState(ctx, out.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Messages[0].Text(); got != "add 2 and 3" {
		t.Errorf("the run's first message, loaded after the caller changed its output: %q", got)
	}
	if got := st.ToolCalls[0].Result.Text(); got != "5" {
		t.Errorf("the run's tool result, loaded after the caller changed its output: %q", got)
	}
	redact(st.Messages)
	st.ToolCalls[0].Result.Parts[0].Text = "REDACTED"
	s, err := session.Load(ctx, e.rt.Store(), "s")
	if err != nil {
		t.Fatal(err)
	}
	redact(s.Messages)

	if _, err := a.Run(ctx, e.rt, "and now?", opts); err != nil {
		t.Fatal(err)
	}
	want := "user:add 2 and 3|assistant:|tool:5|assistant:The sum is 5|user:and now?|"
	if got := requests[len(requests)-1]; got != want {
		t.Errorf("the next turn sent %q, want %q", got, want)
	}
	again, err := a.Wait(ctx, e.rt, out.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if got := again.Thread[0].Text(); got != "add 2 and 3" || again.ToolCalls[0].Result.Text() != "5" || again.ToolCalls[0].Arguments != `{"a":2,"b":3}` {
		t.Errorf("Result after the changes: thread %q, tool call %+v", got, again.ToolCalls[0])
	}
	if again.Thread[1].ToolCalls[0].Arguments != `{"a":2,"b":3}` {
		t.Errorf("Result after the changes: the model's call %+v", again.Thread[1].ToolCalls[0])
	}
	// Cancel returns a state of the caller's too (the run has ended: it
	// is returned as it is).
	cst, err := agentInfo(e.rt.Cancel(ctx, agent.RunRef{Name: "calculator", RunID: out.RunID}, "late"))
	if err != nil {
		t.Fatal(err)
	}
	redact(cst.Messages)
	if st, err := e.rt.LoadState(ctx, out.RunID); err != nil || st.Messages[0].Text() != "add 2 and 3" {
		t.Errorf("after changing what Cancel returned: %v, %v", st.Messages, err)
	}
}

// A custom agent's step may change the messages it is given: the session's
// next run sees them as they were.
func TestCustomStepChangesStayItsOwn(t *testing.T) {
	e := newEnv(t, nil)
	var mu sync.Mutex
	var seen [][]string
	c := agent.Must(agent.NewCustom("scribe", func(_ *agent.StepContext[struct{}], in []model.Message) (string, error) {
		var texts []string
		for i := range in {
			texts = append(texts, in[i].Text())
			for j := range in[i].Parts {
				in[i].Parts[j].Text = "CHANGED"
			}
		}
		mu.Lock()
		seen = append(seen, texts)
		mu.Unlock()
		return "noted", nil
	}, nil))
	if err := c.Serve(t.Context(), e.rt, nil); err != nil {
		t.Fatal(err)
	}
	opts := &agent.RunOptions{SessionID: "s"}
	for _, prompt := range []string{"one", "two"} {
		if _, err := c.Run(runCtx(t), e.rt, prompt, opts); err != nil {
			t.Fatal(err)
		}
	}
	if got := strings.Join(seen[1], ","); got != "one,noted,two" {
		t.Errorf("the second step was given %q, want one,noted,two", got)
	}
}
