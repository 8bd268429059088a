package agent_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/brokertest"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/store/sqlite"
	"github.com/calf-go/calf/tool"
)

// clock is a settable clock for deadlines.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// newClockEnv is newEnv with the runtime and the client on clk.
func newClockEnv(t *testing.T, clk *clock) *env {
	t.Helper()
	mb := memory.New(&memory.Options{MaxAttempts: 3, Backoff: func(int) time.Duration { return time.Millisecond }})
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "calf.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	c := calf.NewClient(mb, &calf.Options{Now: clk.Now})
	e := &env{rt: agent.NewRuntime(c, st, &agent.RuntimeOptions{Now: clk.Now}), client: c, broker: mb, store: st}
	t.Cleanup(func() {
		_ = c.Close()
		_ = mb.Close()
		_ = st.Close()
	})
	return e
}

// manager is a parent agent that gives a task to the researcher subagent
// and answers with what the tool returned, noting an error result.
func newManager(t *testing.T, e *env, calls *atomic.Int64, opts *agent.SubagentOptions) *agent.Agent[string] {
	t.Helper()
	m := agent.Must(agent.New("manager", counted(calls, func(_ context.Context, req *model.Request) (*model.Response, error) {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == model.RoleTool {
			if last.IsError {
				return modeltest.Text("The research failed: " + last.Text()), nil
			}
			return modeltest.Text("Found: " + last.Text()), nil
		}
		return modeltest.ToolCalls(modeltest.Call("call_1", "researcher", `{"input":"What is the answer?"}`)), nil
	}), nil))
	if err := m.AddSubagent(agent.Named("researcher", "Researches a question."), opts); err != nil {
		t.Fatal(err)
	}
	return serve(t, e, m)
}

// A subagent's output becomes the parent's tool result; the subagent runs
// as a child run with a derived id and the parent recorded.
func TestSubagentSuccess(t *testing.T) {
	e := newEnv(t, nil)
	var parentCalls, childCalls atomic.Int64
	var prompt atomic.Value
	serve(t, e, agent.Must(agent.New("researcher", counted(&childCalls, func(_ context.Context, req *model.Request) (*model.Response, error) {
		prompt.Store(req.Messages[len(req.Messages)-1].Text())
		return modeltest.Text("42"), nil
	}), nil)))
	m := newManager(t, e, &parentCalls, nil)
	out, err := m.Run(runCtx(t), e.rt, "ask the researcher", &agent.RunOptions{RunID: "p1"})
	if err != nil {
		t.Fatal(err)
	}
	if out.Output != "Found: 42" {
		t.Errorf("output = %q", out.Output)
	}
	if parentCalls.Load() != 2 || childCalls.Load() != 1 || prompt.Load() != "What is the answer?" {
		t.Errorf("model calls: parent %d, child %d; child prompt %q", parentCalls.Load(), childCalls.Load(), prompt.Load())
	}
	if len(out.ToolCalls) != 1 || out.ToolCalls[0].Status != agent.StatusSuccess || out.ToolCalls[0].Result.Text() != "42" {
		t.Errorf("tool calls = %+v", out.ToolCalls)
	}
	child, err := e.rt.LoadState(t.Context(), agent.SubagentRunID("p1", "call_1"))
	if err != nil {
		t.Fatal(err)
	}
	if child.RunID != "p1/call_1" || child.Parent != "p1" || child.Agent != "researcher" || child.Status != agent.RunComplete || child.SessionID != "" {
		t.Errorf("child run: id %s, parent %q, agent %s, status %s, session %q", child.RunID, child.Parent, child.Agent, child.Status, child.SessionID)
	}
}

// A subagent that fails gives the parent's model an error result, and the
// parent's run goes on.
func TestSubagentFailure(t *testing.T) {
	e := newEnv(t, nil)
	var parentCalls atomic.Int64
	serve(t, e, agent.Must(agent.New("researcher", modeltest.NewTestModel(errors.New("the library is closed")), nil)))
	m := newManager(t, e, &parentCalls, nil)
	out, err := m.Run(runCtx(t), e.rt, "ask", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.Output, "The research failed: ") || !strings.Contains(out.Output, "the library is closed") {
		t.Errorf("output = %q", out.Output)
	}
	if len(out.ToolCalls) != 1 || out.ToolCalls[0].Status != agent.StatusError {
		t.Errorf("tool calls = %+v", out.ToolCalls)
	}
}

// A subagent's run that passes its deadline ends with a timeout error at
// its next step, without another model call; the parent's model gets the
// error.
func TestSubagentTimeout(t *testing.T) {
	clk := &clock{t: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)}
	e := newClockEnv(t, clk)
	var parentCalls, childCalls atomic.Int64
	look := tool.Must(tool.New("look", "Look something up.", func(context.Context, struct{}) (string, error) { return "nothing", nil }))
	serve(t, e, agent.Must(agent.New("researcher", counted(&childCalls, func(context.Context, *model.Request) (*model.Response, error) {
		clk.Add(2 * time.Minute) // the model is slow
		return modeltest.ToolCalls(modeltest.Call("l1", "look", `{}`)), nil
	}), &agent.Options{Tools: []tool.Tool{look}})))
	m := newManager(t, e, &parentCalls, &agent.SubagentOptions{Timeout: time.Minute})
	out, err := m.Run(runCtx(t), e.rt, "ask", &agent.RunOptions{RunID: "p1"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.Output, "The research failed: ") || !strings.Contains(out.Output, "timed out") {
		t.Errorf("output = %q", out.Output)
	}
	if childCalls.Load() != 1 || parentCalls.Load() != 2 {
		t.Errorf("model calls: child %d, parent %d; want 1 and 2", childCalls.Load(), parentCalls.Load())
	}
	child, err := e.rt.LoadState(t.Context(), "p1/call_1")
	if err != nil {
		t.Fatal(err)
	}
	if child.Status != agent.RunCancelled || !strings.HasPrefix(child.Error, "timed out: the run's deadline (2026-11-21T12:01:00Z) passed") {
		t.Errorf("child run: %s, %q", child.Status, child.Error)
	}
}

// MaxTurns bounds the subagent's model calls, below its own maximum.
func TestSubagentMaxTurns(t *testing.T) {
	e := newEnv(t, nil)
	var parentCalls, childCalls atomic.Int64
	look := tool.Must(tool.New("look", "Look something up.", func(context.Context, struct{}) (string, error) { return "nothing", nil }))
	serve(t, e, agent.Must(agent.New("researcher", counted(&childCalls, func(context.Context, *model.Request) (*model.Response, error) {
		return modeltest.ToolCalls(modeltest.Call("", "look", `{}`)), nil // never done
	}), &agent.Options{Tools: []tool.Tool{look}})))
	m := newManager(t, e, &parentCalls, &agent.SubagentOptions{MaxTurns: 3})
	out, err := m.Run(runCtx(t), e.rt, "ask", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.Output, "max turns exceeded") || childCalls.Load() != 3 {
		t.Errorf("output %q after %d child model calls; want max turns after 3", out.Output, childCalls.Load())
	}
}

// Delivering every message twice runs the subagent once and calls each
// model once per step: the same events as a fault-free run.
func TestSubagentDuplicateDelivery(t *testing.T) {
	run := func(o *envOptions) (ids []string, parent, child int64) {
		e := newEnv(t, o)
		var parentCalls, childCalls atomic.Int64
		serve(t, e, agent.Must(agent.New("researcher", counted(&childCalls, func(context.Context, *model.Request) (*model.Response, error) {
			return modeltest.Text("42"), nil
		}), nil)))
		m := newManager(t, e, &parentCalls, nil)
		out, err := m.Run(runCtx(t), e.rt, "ask", &agent.RunOptions{RunID: "p1"})
		if err != nil {
			t.Fatal(err)
		}
		if out.Output != "Found: 42" {
			t.Fatalf("output = %q", out.Output)
		}
		e.settle(t)
		ids, _ = e.eventIDs("calf.agent.>")
		return ids, parentCalls.Load(), childCalls.Load()
	}
	want, _, _ := run(nil)
	for name, wrap := range map[string]func(calf.Broker) calf.Broker{
		"publishes":  func(b calf.Broker) calf.Broker { return brokertest.DuplicatePublishes(b, 2) },
		"deliveries": func(b calf.Broker) calf.Broker { return brokertest.DuplicateDeliveries(b, 2) },
	} {
		t.Run(name, func(t *testing.T) {
			got, pc, cc := run(&envOptions{wrap: wrap})
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("event ids differ from a fault-free run (-want +got):\n%s", diff)
			}
			if pc != 2 || cc != 1 {
				t.Errorf("model calls: parent %d, child %d; want 2 and 1", pc, cc)
			}
		})
	}
}

// RunStream shows a subagent's start and end in the parent's stream, then
// a handoff and the events of the run that continues the conversation.
func TestRunStreamShowsSubagentsAndHandoffs(t *testing.T) {
	e := newEnv(t, nil)
	serve(t, e, agent.Must(agent.New("researcher", modeltest.NewTestModel(modeltest.Text("42")), nil)))
	closer := serve(t, e, agent.Must(agent.New("closer", modeltest.NewTestModel(modeltest.Text("The answer is 42. Bye!")), nil)))
	lead := agent.Must(agent.New("lead", modeltest.NewTestModel(
		modeltest.ToolCalls(modeltest.Call("c1", "researcher", `{"input":"find the answer"}`)),
		modeltest.ToolCalls(modeltest.Call("c2", "transfer_to_closer", `{}`)),
	), nil))
	if err := lead.AddSubagent(agent.Named("researcher", "Finds answers."), nil); err != nil {
		t.Fatal(err)
	}
	if err := lead.AddTool(tool.Must(agent.Handoff(closer, nil))); err != nil {
		t.Fatal(err)
	}
	serve(t, e, lead)
	var got []string
	for ev, err := range lead.RunStream(runCtx(t), e.rt, "go", &agent.RunOptions{RunID: "s1"}) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Kind == agent.EventDelta {
			continue
		}
		s := ev.Agent + " " + string(ev.Kind)
		switch ev.Kind {
		case agent.EventSubagentSpawned, agent.EventSubagentCompleted:
			s += " " + ev.Subagent.Agent + " " + ev.Subagent.RunID
		case agent.EventHandoff:
			s += " " + ev.Output.Handoff.Agent + " " + ev.Output.Handoff.RunID
		case agent.EventOutput:
			s += " " + string(ev.Output.Content)
		}
		got = append(got, s+" @"+ev.RunID)
	}
	want := []string{
		"lead input @s1",
		"lead inference @s1",
		"lead tool_call @s1",
		"lead subagent_spawned researcher s1/c1 @s1",
		"lead subagent_completed researcher s1/c1 @s1",
		"lead tool_result @s1",
		"lead inference @s1",
		"lead tool_call @s1",
		"lead tool_result @s1",
		"lead handoff closer s1.handoff.1 @s1",
		"closer input @s1.handoff.1",
		"closer inference @s1.handoff.1",
		`closer output "The answer is 42. Bye!" @s1.handoff.1`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stream (-want +got):\n%s", diff)
	}
}

// A subagent that hands off answers its parent through the last run of its
// chain.
func TestSubagentThatHandsOff(t *testing.T) {
	e := newEnv(t, nil)
	var parentCalls atomic.Int64
	serve(t, e, agent.Must(agent.New("expert", modeltest.NewTestModel(modeltest.Text("deep 42")), nil)))
	serve(t, e, agent.Must(agent.New("researcher", modeltest.NewTestModel(
		modeltest.ToolCalls(modeltest.Call("h", "transfer_to_expert", `{}`)),
	), &agent.Options{Tools: []tool.Tool{tool.Must(agent.Handoff(agent.Named("expert", ""), nil))}})))
	m := newManager(t, e, &parentCalls, nil)
	out, err := m.Run(runCtx(t), e.rt, "ask", &agent.RunOptions{RunID: "p1"})
	if err != nil {
		t.Fatal(err)
	}
	if out.Output != "Found: deep 42" {
		t.Errorf("output = %q", out.Output)
	}
	last, err := e.rt.LoadState(t.Context(), "p1/call_1.handoff.1")
	if err != nil {
		t.Fatal(err)
	}
	if last.Agent != "expert" || last.Parent != "p1" || last.Status != agent.RunComplete {
		t.Errorf("last run of the subagent's chain: agent %s, parent %q, %s", last.Agent, last.Parent, last.Status)
	}
}

// A parent that waits for a subagent whose input was lost (the broker
// lost it in a crash) is continued by Recover: the tool call is emitted
// again and starts the subagent's run. (A subagent that no process serves
// fails its parent fast: TestChildRunNotServedFailsFast.)
func TestSubagentRecoverAfterLostInput(t *testing.T) {
	e := newEnv(t, nil)
	var parentCalls atomic.Int64
	m := newManager(t, e, &parentCalls, nil)
	// A member of the researcher's input group that loses what it gets,
	// as a broker that crashed would, until the test closes it.
	in := agent.InputChannel("researcher")
	loseCtx, stopLosing := context.WithCancel(t.Context())
	b := e.client.Broker()
	sub, err := b.Subscribe(loseCtx, in, func(context.Context, *calf.Message) error { return nil }, &calf.SubscribeOptions{Group: in})
	if err != nil {
		t.Fatal(err)
	}
	defer stopLosing()
	f, err := e.client.Follow(t.Context(), agent.OutputChannel("manager"), "p1")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := m.Submit(t.Context(), e.rt, "ask", &agent.RunOptions{RunID: "p1"}); err != nil {
		t.Fatal(err)
	}
	e.settle(t) // the researcher's input went to no one
	st, err := e.rt.LoadState(t.Context(), "p1")
	if err != nil {
		t.Fatal(err)
	}
	if st.Phase != agent.PhaseTools || len(st.Pending) != 1 || st.Pending[0].Result != nil {
		t.Fatalf("parent: phase %s, pending %+v; want waiting for the subagent", st.Phase, st.Pending)
	}
	if _, err := e.rt.LoadState(t.Context(), "p1/call_1"); err == nil {
		t.Fatal("the subagent's run exists although its input was lost")
	}
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	serve(t, e, agent.Must(agent.New("researcher", modeltest.NewTestModel(modeltest.Text("42")), nil)))
	if n, err := m.Recover(t.Context(), e.rt, nil); err != nil || n != 1 {
		t.Fatalf("Recover = %d, %v; want 1 run continued", n, err)
	}
	msg, err := f.Next(runCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	var out agent.OutputEvent
	if err := msg.Decode(&out); err != nil {
		t.Fatal(err)
	}
	if got, err := m.DecodeOutput(&out); err != nil || got != "Found: 42" {
		t.Errorf("output = %q, %v", got, err)
	}
}

// An agent that calls itself as a subagent stops at the depth limit: the
// deepest call gets an error result, and every run completes.
func TestSubagentDepthIsBounded(t *testing.T) {
	e := newEnv(t, nil)
	var calls atomic.Int64
	r := agent.Must(agent.New("recurse", counted(&calls, func(_ context.Context, req *model.Request) (*model.Response, error) {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == model.RoleTool {
			return modeltest.Text("<" + last.Text() + ">"), nil
		}
		return modeltest.ToolCalls(modeltest.Call("c", "recurse", `{"input":"again"}`)), nil
	}), nil))
	if err := r.AddSubagent(r, &agent.SubagentOptions{MaxDepth: 2}); err != nil {
		t.Fatal(err)
	}
	serve(t, e, r)
	out, err := r.Run(runCtx(t), e.rt, "go", &agent.RunOptions{RunID: "d"})
	if err != nil {
		t.Fatal(err)
	}
	want := "<<<the agent recurse was not called: this run is 2 subagent calls deep, the limit>>>"
	if out.Output != want || calls.Load() != 6 {
		t.Errorf("output %q after %d model calls; want %q after 6", out.Output, calls.Load(), want)
	}
	deepest, err := e.rt.LoadState(t.Context(), "d/c/c")
	if err != nil || deepest.Depth != 2 || deepest.Parent != "d/c" {
		t.Errorf("deepest run: %+v, %v", deepest, err)
	}
}

// A subagent with a structured output gives its JSON as the tool's
// structured result (and as text for the model).
func TestSubagentStructuredOutput(t *testing.T) {
	e := newEnv(t, nil)
	type city struct {
		Name       string `json:"name"`
		Population int    `json:"population"`
	}
	serve(t, e, agent.Must(agent.NewTyped[city]("geo", modeltest.NewTestModel(modeltest.JSON(city{"Lyon", 520000})), nil)))
	var calls atomic.Int64
	m := agent.Must(agent.New("writer", counted(&calls, func(_ context.Context, req *model.Request) (*model.Response, error) {
		if last := req.Messages[len(req.Messages)-1]; last.Role == model.RoleTool {
			return modeltest.Text(last.Text()), nil
		}
		return modeltest.ToolCalls(modeltest.Call("g", "lookup_city", `{"input":"Lyon"}`)), nil
	}), nil))
	if err := m.AddSubagent(agent.Named("geo", "Facts about cities."), &agent.SubagentOptions{Name: "lookup_city"}); err != nil {
		t.Fatal(err)
	}
	serve(t, e, m)
	out, err := m.Run(runCtx(t), e.rt, "Lyon?", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"name":"Lyon","population":520000}`
	if out.Output != want || string(out.ToolCalls[0].Result.Structured) != want || out.ToolCalls[0].Name != "lookup_city" {
		t.Errorf("output %q, tool call %+v", out.Output, out.ToolCalls[0])
	}
}

// Bad arguments to a subagent tool go back to the model like any tool's,
// and start no run.
func TestSubagentBadArguments(t *testing.T) {
	e := newEnv(t, nil)
	var childCalls, parentCalls atomic.Int64
	serve(t, e, agent.Must(agent.New("researcher", counted(&childCalls, func(context.Context, *model.Request) (*model.Response, error) {
		return modeltest.Text("42"), nil
	}), nil)))
	m := agent.Must(agent.New("manager", counted(&parentCalls, func(_ context.Context, req *model.Request) (*model.Response, error) {
		if last := req.Messages[len(req.Messages)-1]; last.Role == model.RoleTool {
			return modeltest.Text(last.Text()), nil
		}
		return modeltest.ToolCalls(modeltest.Call("b", "researcher", `{"question":"?"}`)), nil
	}), nil))
	if err := m.AddSubagent(agent.Named("researcher", ""), nil); err != nil {
		t.Fatal(err)
	}
	serve(t, e, m)
	out, err := m.Run(runCtx(t), e.rt, "ask", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.Output, `invalid arguments for tool "researcher"`) || childCalls.Load() != 0 {
		t.Errorf("output %q, child model calls %d", out.Output, childCalls.Load())
	}
}

// A caller that stops waiting cancels the subagent runs its run waits for.
func TestSubagentCancelledWithParent(t *testing.T) {
	e := newEnv(t, nil)
	g := &gate{started: make(chan string, 1), release: make(chan struct{})}
	defer close(g.release)
	var parentCalls atomic.Int64
	serve(t, e, agent.Must(agent.New("researcher", modeltest.NewTestModel(
		modeltest.ToolCalls(modeltest.Call("w1", "wait", `{"label":"x"}`)),
		modeltest.Text("too late"),
	), &agent.Options{Tools: []tool.Tool{newGateTool(t, g)}})))
	m := newManager(t, e, &parentCalls, nil)
	ctx, cancel := context.WithCancel(runCtx(t))
	go func() {
		<-g.started
		cancel()
	}()
	if _, err := m.Run(ctx, e.rt, "ask", &agent.RunOptions{RunID: "p1"}); !errors.Is(err, agent.ErrRunCancelled) {
		t.Fatalf("err = %v; want a cancelled run", err)
	}
	child, err := e.rt.LoadState(t.Context(), "p1/call_1")
	if err != nil {
		t.Fatal(err)
	}
	if child.Status != agent.RunCancelled || !strings.Contains(child.Error, "parent run p1 was cancelled") {
		t.Errorf("subagent run: %s, %q", child.Status, child.Error)
	}
}
