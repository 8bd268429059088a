package agent_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/agent/session"
	"github.com/calf-go/calf/broker/brokertest"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/tool"
)

// counted wraps a model function and counts its calls.
func counted(n *atomic.Int64, fn modeltest.FunctionModel) modeltest.FunctionModel {
	return func(ctx context.Context, req *model.Request) (*model.Response, error) {
		n.Add(1)
		return fn(ctx, req)
	}
}

func serve[O any](t *testing.T, e *env, a *agent.Agent[O]) *agent.Agent[O] {
	t.Helper()
	if err := a.Serve(t.Context(), e.rt, nil); err != nil {
		t.Fatal(err)
	}
	return a
}

// triagePair is a triage agent that hands off to a refunds agent, with the
// requests the refunds agent's model saw.
type triagePair struct {
	triage, refunds *agent.Agent[string]
	triageCalls     atomic.Int64
	refundCalls     atomic.Int64
	mu              sync.Mutex
	seen            [][]model.Message
}

func newTriagePair(t *testing.T, e *env, opts *agent.HandoffOptions) *triagePair {
	t.Helper()
	p := &triagePair{}
	p.refunds = serve(t, e, agent.Must(agent.New("refunds", counted(&p.refundCalls, func(_ context.Context, req *model.Request) (*model.Response, error) {
		p.mu.Lock()
		p.seen = append(p.seen, req.Messages)
		p.mu.Unlock()
		return modeltest.Text("Your refund is on its way."), nil
	}), &agent.Options{Instructions: "You handle refunds.", Description: "Handles refunds."})))
	transfer := tool.Must(agent.Handoff(p.refunds, opts))
	if got := transfer.Definition().Name; got != "transfer_to_refunds" {
		t.Fatalf("handoff tool name = %q", got)
	}
	p.triage = serve(t, e, agent.Must(agent.New("triage", counted(&p.triageCalls, func(context.Context, *model.Request) (*model.Response, error) {
		return modeltest.ToolCalls(modeltest.Call("call_t", "transfer_to_refunds", `{"context":"The customer wants a refund for order 7."}`)), nil
	}), &agent.Options{Instructions: "Route the customer.", Tools: []tool.Tool{transfer}})))
	return p
}

// A handoff ends the first run with a handoff output, starts the target's
// run with the filtered conversation and the context, records the chain,
// and the caller gets the target's output.
func TestHandoffWithInputFilter(t *testing.T) {
	e := newEnv(t, nil)
	p := newTriagePair(t, e, &agent.HandoffOptions{TextOnly: true})
	out, err := p.triage.Run(runCtx(t), e.rt, "I want my money back", &agent.RunOptions{RunID: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	if out.Output != "Your refund is on its way." || out.RunID != "r1.handoff.1" {
		t.Errorf("output %q of run %s; want the refunds agent's answer from run r1.handoff.1", out.Output, out.RunID)
	}
	if diff := cmp.Diff([]agent.Hop{{Agent: "triage", RunID: "r1"}}, out.Chain); out.Agent != "refunds" || diff != "" {
		t.Errorf("answered by %q after the chain (-want +got):\n%s; want refunds", out.Agent, diff)
	}
	if p.triageCalls.Load() != 1 || p.refundCalls.Load() != 1 {
		t.Errorf("model calls: triage %d, refunds %d; want 1 and 1", p.triageCalls.Load(), p.refundCalls.Load())
	}
	// The output covers the chain: both runs' messages, calls and usage.
	var roles []model.Role
	for _, m := range out.Messages {
		roles = append(roles, m.Role)
	}
	if diff := cmp.Diff([]model.Role{"user", "assistant", "tool", "user", "assistant"}, roles); diff != "" {
		t.Errorf("output messages (-want +got):\n%s", diff)
	}
	if out.Steps != 2 || out.Usage.Requests != 2 || len(out.ToolCalls) != 1 || out.ToolCalls[0].Handoff == nil {
		t.Errorf("steps %d, requests %d, tool calls %+v; want 2, 2 and the handoff call", out.Steps, out.Usage.Requests, out.ToolCalls)
	}
	// The filter removed the handoff's tool call and result; the context
	// follows the conversation as a user message.
	type msg struct{ Role, Text string }
	var got []msg
	for _, m := range p.seen[0] {
		got = append(got, msg{string(m.Role), m.Text()})
	}
	want := []msg{
		{"system", "You handle refunds."},
		{"user", "I want my money back"},
		{"user", "The customer wants a refund for order 7."},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("what the refunds agent saw (-want +got):\n%s", diff)
	}
	src, err := e.rt.LoadState(t.Context(), "r1")
	if err != nil {
		t.Fatal(err)
	}
	if src.Status != agent.RunHandedOff || src.HandedOffTo == nil || *src.HandedOffTo != (agent.StoredHop{Agent: "refunds", RunID: "r1.handoff.1"}) {
		t.Errorf("source run: status %s, handed off to %+v", src.Status, src.HandedOffTo)
	}
	dst, err := e.rt.LoadState(t.Context(), "r1.handoff.1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]agent.StoredHop{{Agent: "triage", RunID: "r1"}}, dst.Chain); diff != "" {
		t.Errorf("target's chain (-want +got):\n%s", diff)
	}
	if dst.Status != agent.RunComplete || dst.Correlation != "r1" {
		t.Errorf("target run: status %s, correlation %q", dst.Status, dst.Correlation)
	}
	// Result of the first run follows the chain.
	res, err := p.triage.Wait(t.Context(), e.rt, "r1")
	if err != nil || res.Output != out.Output {
		t.Errorf("Result(r1) = %+v, %v", res, err)
	}
	// The first run's output says where it went.
	e.settle(t)
	ids, _ := e.eventIDs(agent.OutputChannel("triage"))
	if diff := cmp.Diff([]string{"r1.output"}, ids); diff != "" {
		t.Errorf("triage outputs (-want +got):\n%s", diff)
	}
}

// Without a filter the target sees the whole conversation, the handoff's
// tool call and result included.
func TestHandoffWithoutFilterPassesEverything(t *testing.T) {
	e := newEnv(t, nil)
	p := newTriagePair(t, e, nil)
	if _, err := p.triage.Run(runCtx(t), e.rt, "refund please", nil); err != nil {
		t.Fatal(err)
	}
	var roles []model.Role
	for _, m := range p.seen[0] {
		roles = append(roles, m.Role)
	}
	if diff := cmp.Diff([]model.Role{"system", "user", "assistant", "tool", "user"}, roles); diff != "" {
		t.Errorf("roles the target saw (-want +got):\n%s", diff)
	}
}

// Two agents that always hand off to each other stop at the chain's limit
// with an error that names the chain, and the caller gets it.
func TestHandoffCycleIsBounded(t *testing.T) {
	e := newEnv(t, nil)
	var calls atomic.Int64
	mk := func(name, other string) *agent.Agent[string] {
		transfer := tool.Must(agent.Handoff(agent.Named(other, ""), &agent.HandoffOptions{MaxHandoffs: 3}))
		return serve(t, e, agent.Must(agent.New(name, counted(&calls, func(context.Context, *model.Request) (*model.Response, error) {
			return modeltest.ToolCalls(modeltest.Call("c", "transfer_to_"+other, `{}`)), nil
		}), &agent.Options{Tools: []tool.Tool{transfer}})))
	}
	ping := mk("ping", "pong")
	mk("pong", "ping")
	_, err := ping.Run(runCtx(t), e.rt, "go", &agent.RunOptions{RunID: "loop"})
	var re *agent.RunError
	if !errors.As(err, &re) || !errors.Is(err, agent.ErrRunFailed) {
		t.Fatalf("err = %v; want a failed run", err)
	}
	if !strings.Contains(re.Reason, "too many handoffs") || !strings.Contains(re.Reason, "ping → pong → ping → pong") {
		t.Errorf("reason = %q", re.Reason)
	}
	if re.RunID != "loop.handoff.3" || calls.Load() != 4 {
		t.Errorf("failed run %s after %d model calls; want loop.handoff.3 after 4", re.RunID, calls.Load())
	}
	last, err := e.rt.LoadState(t.Context(), "loop.handoff.3")
	if err != nil || len(last.Chain) != 3 {
		t.Fatalf("last run: %+v, %v", last, err)
	}
}

// A tool may decide at run time to hand off, with HandoffTo.
func TestHandoffToFromAnyTool(t *testing.T) {
	e := newEnv(t, nil)
	serve(t, e, agent.Must(agent.New("vip", modeltest.NewTestModel(modeltest.Text("Welcome, VIP.")), nil)))
	route, err := tool.New("route", "Route the customer.", func(ctx context.Context, in struct {
		Tier string `json:"tier"`
	}) (string, error) {
		if in.Tier == "gold" {
			return "routed", agent.HandoffTo(ctx, "vip", nil)
		}
		return "stay", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	front := serve(t, e, agent.Must(agent.New("front", modeltest.NewTestModel(
		modeltest.ToolCalls(modeltest.Call("c1", "route", `{"tier":"gold"}`)),
	), &agent.Options{Tools: []tool.Tool{route}})))
	out, err := front.Run(runCtx(t), e.rt, "hello", nil)
	if err != nil {
		t.Fatal(err)
	}
	if out.Output != "Welcome, VIP." {
		t.Errorf("output = %q", out.Output)
	}
	if err := agent.HandoffTo(t.Context(), "vip", nil); err == nil {
		t.Error("HandoffTo outside a tool call succeeded")
	}
}

// Delivering every message twice hands off once: the same events as a
// fault-free run, one model call per agent.
func TestHandoffDuplicateDelivery(t *testing.T) {
	run := func(o *envOptions) (ids []string, triage, refunds int64) {
		e := newEnv(t, o)
		p := newTriagePair(t, e, &agent.HandoffOptions{TextOnly: true})
		out, err := p.triage.Run(runCtx(t), e.rt, "refund", &agent.RunOptions{RunID: "r1"})
		if err != nil {
			t.Fatal(err)
		}
		if out.Output != "Your refund is on its way." {
			t.Fatalf("output = %q", out.Output)
		}
		e.settle(t)
		ids, _ = e.eventIDs("calf.agent.>")
		return ids, p.triageCalls.Load(), p.refundCalls.Load()
	}
	want, _, _ := run(nil)
	for name, wrap := range map[string]func(calf.Broker) calf.Broker{
		"publishes":  func(b calf.Broker) calf.Broker { return brokertest.DuplicatePublishes(b, 2) },
		"deliveries": func(b calf.Broker) calf.Broker { return brokertest.DuplicateDeliveries(b, 2) },
	} {
		t.Run(name, func(t *testing.T) {
			got, tc, rc := run(&envOptions{wrap: wrap})
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("event ids differ from a fault-free run (-want +got):\n%s", diff)
			}
			if tc != 1 || rc != 1 {
				t.Errorf("model calls: triage %d, refunds %d; want 1 and 1", tc, rc)
			}
		})
	}
}

// The runs of a chain continue the caller's session: the session gets the
// first run's messages at the handoff and the last run's at its end.
func TestHandoffContinuesSession(t *testing.T) {
	e := newEnv(t, nil)
	p := newTriagePair(t, e, &agent.HandoffOptions{TextOnly: true})
	if _, err := p.triage.Run(runCtx(t), e.rt, "refund please", &agent.RunOptions{RunID: "r1", SessionID: "chat"}); err != nil {
		t.Fatal(err)
	}
	s, err := session.Load(t.Context(), e.rt.Store(), "chat")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"r1", "r1.handoff.1"}, s.Runs); diff != "" {
		t.Errorf("session runs (-want +got):\n%s", diff)
	}
	var roles []model.Role
	for _, m := range s.Messages {
		roles = append(roles, m.Role)
	}
	// triage: user, its handoff call and result; refunds: the context, its answer.
	if diff := cmp.Diff([]model.Role{"user", "assistant", "tool", "user", "assistant"}, roles); diff != "" {
		t.Errorf("session roles (-want +got):\n%s", diff)
	}
}

// A caller that stops waiting cancels the run that carries the chain on.
func TestHandoffCancelReachesTheChain(t *testing.T) {
	e := newEnv(t, nil)
	g := &gate{started: make(chan string, 1), release: make(chan struct{})}
	defer close(g.release)
	serve(t, e, agent.Must(agent.New("slow", modeltest.NewTestModel(
		modeltest.ToolCalls(modeltest.Call("w1", "wait", `{"label":"x"}`)),
		modeltest.Text("too late"),
	), &agent.Options{Tools: []tool.Tool{newGateTool(t, g)}})))
	front := serve(t, e, agent.Must(agent.New("front", modeltest.NewTestModel(
		modeltest.ToolCalls(modeltest.Call("c1", "transfer_to_slow", `{}`)),
	), &agent.Options{Tools: []tool.Tool{tool.Must(agent.Handoff(agent.Named("slow", ""), nil))}})))
	ctx, cancel := context.WithCancel(runCtx(t))
	go func() {
		<-g.started
		cancel()
	}()
	_, err := front.Run(ctx, e.rt, "go", &agent.RunOptions{RunID: "c"})
	if !errors.Is(err, agent.ErrRunCancelled) {
		t.Fatalf("err = %v; want a cancelled run", err)
	}
	st, err := e.rt.LoadState(t.Context(), "c.handoff.1")
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != agent.RunCancelled {
		t.Errorf("the continuing run is %s; want cancelled", st.Status)
	}
}

// A handoff request that arrives on the wire with a name that is not an
// agent's (from a tool in another process, say) fails the run instead of
// publishing on a channel it names.
func TestHandoffToInvalidNameFails(t *testing.T) {
	e := newEnv(t, nil)
	a := serve(t, e, agent.Must(agent.New("src", modeltest.NewTestModel(
		modeltest.ToolCalls(modeltest.Call("c1", "remote", `{}`)),
	), &agent.Options{Tools: []tool.Tool{tool.Must(tool.New("remote", "A tool served elsewhere.", func(ctx context.Context, _ struct{}) (string, error) {
		<-ctx.Done() // the remote worker answers first
		return "", ctx.Err()
	}))}})))
	// Answer the call as a remote tool would, before any local execution.
	if err := e.client.Handle(t.Context(), agent.ToolCallChannel("src", "remote"), func(ctx context.Context, m *calf.Message) error {
		var ev agent.ToolCallEvent
		if err := m.Decode(&ev); err != nil {
			return err
		}
		_, err := e.client.Emit(ctx, agent.ToolResultChannel("src"), agent.ToolResultEvent{
			Step: ev.Step, ToolCallID: ev.ToolCallID, ToolName: ev.ToolName, Status: agent.StatusSuccess,
			Result: tool.TextResult("go"), Handoff: &agent.HandoffRequest{Agent: "x.tool_call.y"},
		}, calf.WithID(m.ID+".remote"))
		return err
	}, &calf.SubscribeOptions{Group: "remote-worker"}); err != nil {
		t.Fatal(err)
	}
	_, err := a.Run(runCtx(t), e.rt, "go", nil)
	if !errors.Is(err, agent.ErrRunFailed) || !strings.Contains(err.Error(), `handoff to "x.tool_call.y" refused`) {
		t.Fatalf("err = %v", err)
	}
}

// The output event of a handoff chain names the agent that answered and
// the chain that led to it, for observers that read the wire only.
func TestOutputEventNamesWhoAnswered(t *testing.T) {
	e := newEnv(t, nil)
	p := newTriagePair(t, e, nil)
	var last *agent.OutputEvent
	for ev, err := range p.triage.RunStream(runCtx(t), e.rt, "refund please", &agent.RunOptions{RunID: "r2"}) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Kind == agent.EventOutput {
			last = ev.Output
		}
	}
	if last == nil || last.Agent != "refunds" || last.RunID != "r2.handoff.1" || len(last.Chain) != 1 || last.Chain[0] != (agent.Hop{Agent: "triage", RunID: "r2"}) {
		t.Errorf("output event %+v; want the refunds agent's, after triage's run r2", last)
	}
}

// A handoff to an agent of another output type is refused when the tool
// is added, not at run time.
func TestHandoffToAnotherOutputTypeIsRefused(t *testing.T) {
	type verdict struct {
		OK bool `json:"ok"`
	}
	judge := agent.Must(agent.NewTyped[verdict]("judge", modeltest.NewTestModel(), nil))
	transfer := tool.Must(agent.Handoff(judge, nil))
	_, err := agent.New("front", modeltest.NewTestModel(), &agent.Options{Tools: []tool.Tool{transfer}})
	if !errors.Is(err, agent.ErrInvalidAgent) || !strings.Contains(err.Error(), "judge answers with agent_test.verdict") {
		t.Errorf("err = %v; want ErrInvalidAgent naming judge's output type", err)
	}
	same := agent.Must(agent.NewTyped[verdict]("appeal", modeltest.NewTestModel(), nil))
	if err := same.AddTool(transfer); err != nil {
		t.Errorf("a handoff between agents of one output type: %v", err)
	}
}
