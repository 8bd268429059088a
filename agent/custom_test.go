package agent_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/agent/session"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/tool"
)

// tally is the state of the counting agent: how many runs of the session
// it answered, and the prompts it saw.
type tally struct {
	Runs    int      `json:"runs"`
	Prompts []string `json:"prompts"`
}

type tallyOut struct {
	Runs     int    `json:"runs"`
	Messages int    `json:"messages"`
	Last     string `json:"last"`
}

// newCounter is a custom agent with state: each step counts the session's
// runs, emits an event, and answers with what it saw.
func newCounter(t *testing.T, e *env, steps *atomic.Int64) *agent.Custom[tally, tallyOut] {
	t.Helper()
	c, err := agent.NewCustom("counter", func(sc *agent.StepContext[tally], in []model.Message) (tallyOut, error) {
		steps.Add(1)
		last := in[len(in)-1].Text()
		if last == "fail" {
			return tallyOut{}, errors.New("asked to fail")
		}
		sc.State.Runs++
		sc.State.Prompts = append(sc.State.Prompts, last)
		if err := sc.EmitEvent("counted", map[string]int{"runs": sc.State.Runs}); err != nil {
			return tallyOut{}, err
		}
		return tallyOut{Runs: sc.State.Runs, Messages: len(in), Last: last}, nil
	}, &agent.CustomOptions{Description: "Counts the runs of a session."})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Serve(t.Context(), e.rt, nil); err != nil {
		t.Fatal(err)
	}
	return c
}

// A custom agent runs on the agent channels: its output is typed, its
// events are in RunStream in order, its state follows the session, and
// State and SetState reach it from outside; SetState with the zero state
// clears it.
func TestCustomAgentRunStreamAndState(t *testing.T) {
	e := newEnv(t, nil)
	var steps atomic.Int64
	c := newCounter(t, e, &steps)
	ctx := runCtx(t)
	sess := &agent.RunOptions{SessionID: "s1"}

	out, err := c.Run(ctx, e.rt, "one", sess)
	if err != nil {
		t.Fatal(err)
	}
	if out.Output != (tallyOut{Runs: 1, Messages: 1, Last: "one"}) {
		t.Fatalf("first run: %+v", out.Output)
	}
	var kinds []string
	var custom *agent.CustomEvent
	var final *agent.OutputEvent
	for ev, err := range c.RunStream(ctx, e.rt, "two", sess) {
		if err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, string(ev.Kind))
		switch ev.Kind {
		case agent.EventCustom:
			custom = ev.Custom
		case agent.EventOutput:
			final = ev.Output
		}
	}
	if got := strings.Join(kinds, " "); got != "input inference custom output" {
		t.Errorf("stream kinds %q; want input inference custom output", got)
	}
	if custom == nil || custom.Type != "counted" || string(custom.Data) != `{"runs":2}` || custom.Step != 1 {
		t.Errorf("custom event %+v; want counted {\"runs\":2} at step 1", custom)
	}
	second, err := c.DecodeOutput(final)
	if err != nil {
		t.Fatal(err)
	}
	// The session's history: one, its answer, two.
	if second != (tallyOut{Runs: 2, Messages: 3, Last: "two"}) {
		t.Errorf("second run: %+v; want 2 runs over 3 messages", second)
	}

	s, err := c.State(ctx, e.rt, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if s.Runs != 2 || strings.Join(s.Prompts, ",") != "one,two" {
		t.Errorf("State = %+v; want 2 runs, prompts one,two", s)
	}
	// Another session, and a run outside any, start from the zero state.
	other, err := c.Run(ctx, e.rt, "elsewhere", &agent.RunOptions{SessionID: "s2"})
	if err != nil {
		t.Fatal(err)
	}
	alone, err := c.Run(ctx, e.rt, "alone", nil)
	if err != nil {
		t.Fatal(err)
	}
	if other.Output.Runs != 1 || alone.Output.Runs != 1 {
		t.Errorf("runs counted %d in a new session and %d outside one; want 1 and 1", other.Output.Runs, alone.Output.Runs)
	}

	if err := c.SetState(ctx, e.rt, "s1", tally{Runs: 40}); err != nil {
		t.Fatal(err)
	}
	out, err = c.Run(ctx, e.rt, "three", sess)
	if err != nil {
		t.Fatal(err)
	}
	if out.Output.Runs != 41 {
		t.Errorf("after SetState(40) the run counted %d; want 41", out.Output.Runs)
	}
	if err := c.SetState(ctx, e.rt, "s1", tally{}); err != nil {
		t.Fatal(err)
	}
	if s, err := c.State(ctx, e.rt, "s1"); err != nil || s.Runs != 0 || s.Prompts != nil {
		t.Errorf("after SetState of the zero state: %+v, %v; want the zero state", s, err)
	}
	if _, err := c.State(ctx, e.rt, ""); err == nil {
		t.Error("State of an empty session id: no error")
	}

	// A step's error fails the run, and leaves the state alone.
	_, err = c.Run(ctx, e.rt, "fail", sess)
	var re *agent.RunError
	if !errors.As(err, &re) || !strings.Contains(re.Error(), "asked to fail") {
		t.Errorf("a failing step: %v; want a RunError saying why", err)
	}
	if s, _ := c.State(ctx, e.rt, "s1"); s.Runs != 0 {
		t.Errorf("a failed step changed the state: %+v", s)
	}
}

// A stateless custom agent with string output: no state record, the
// output is the text.
func TestCustomAgentStateless(t *testing.T) {
	e := newEnv(t, nil)
	upper := agent.Must(agent.NewCustom("upper", func(sc *agent.StepContext[struct{}], in []model.Message) (string, error) {
		return strings.ToUpper(in[len(in)-1].Text()), nil
	}, nil))
	if err := upper.Serve(t.Context(), e.rt, nil); err != nil {
		t.Fatal(err)
	}
	out, err := upper.Run(runCtx(t), e.rt, "shout", nil)
	if err != nil {
		t.Fatal(err)
	}
	if out.Output != "SHOUT" || len(out.Messages) != 2 || out.Messages[1].Text() != "SHOUT" {
		t.Errorf("output %q, messages %v", out.Output, out.Messages)
	}
	recs, err := e.store.List(t.Context(), agent.KindAgentState, "", "", 0)
	if err != nil || len(recs) != 0 {
		t.Errorf("a stateless agent kept %d state records (%v)", len(recs), err)
	}
	if _, err := agent.NewCustom[struct{}, string]("x", nil, nil); !errors.Is(err, agent.ErrInvalidAgent) {
		t.Errorf("no step: %v; want ErrInvalidAgent", err)
	}
	if _, err := agent.NewCustom("x", func(*agent.StepContext[chan int], []model.Message) (string, error) { return "", nil }, nil); !errors.Is(err, agent.ErrInvalidAgent) {
		t.Errorf("a state that does not encode: %v; want ErrInvalidAgent", err)
	}
}

// A step that overruns its timeout fails the run with a clear error.
func TestCustomAgentStepTimeout(t *testing.T) {
	e := newEnv(t, nil)
	slow := agent.Must(agent.NewCustom("slow", func(sc *agent.StepContext[struct{}], _ []model.Message) (string, error) {
		<-sc.Done()
		return "", sc.Err()
	}, &agent.CustomOptions{StepTimeout: 50 * time.Millisecond}))
	if err := slow.Serve(t.Context(), e.rt, nil); err != nil {
		t.Fatal(err)
	}
	_, err := slow.Run(runCtx(t), e.rt, "wait", nil)
	if err == nil || !strings.Contains(err.Error(), "step timed out after 50ms") {
		t.Errorf("err = %v; want the step's timeout", err)
	}
}

// failRunWrite fails the first write of a run record that follows a write
// of a record of kind after (an agent's state, a custom step's call), as a
// process that stops between the two would: the inference is delivered
// again, and the step runs again.
type failRunWrite struct {
	store.Store
	after   string
	mu      sync.Mutex
	armed   bool
	tripped bool
}

func (s *failRunWrite) Put(ctx context.Context, kind, id string, data []byte, version int64) (int64, error) {
	s.mu.Lock()
	if kind == s.after {
		s.armed = true
	} else if kind == store.KindRun && s.armed && !s.tripped {
		s.tripped = true
		s.mu.Unlock()
		return 0, errors.New("injected: process stopped")
	}
	s.mu.Unlock()
	return s.Store.Put(ctx, kind, id, data, version)
}

// A step whose state was saved, but whose run was not recorded, is not
// applied again on redelivery: the run gets the output that step
// returned, and the state counts it once.
func TestCustomAgentStepAppliedOnce(t *testing.T) {
	e := newEnv(t, nil)
	fs := &failRunWrite{Store: e.store, after: agent.KindAgentState}
	worker := agent.NewRuntime(e.client, fs, nil)
	var steps atomic.Int64
	c := newCounter(t, &env{rt: worker}, &steps)
	out, err := c.Run(runCtx(t), e.rt, "once", &agent.RunOptions{SessionID: "s"})
	if err != nil {
		t.Fatal(err)
	}
	if !fs.tripped {
		t.Fatal("the fault was not injected")
	}
	s, err := c.State(t.Context(), e.rt, "s")
	if err != nil {
		t.Fatal(err)
	}
	if steps.Load() != 1 || s.Runs != 1 || out.Output.Runs != 1 {
		t.Errorf("steps %d, state %+v, output %+v; want the step applied once", steps.Load(), s, out.Output)
	}
}

// A custom agent is a subagent of a model agent (its output is the tool's
// result) and the target of a handoff (it sees the conversation).
func TestCustomAgentAsSubagentAndHandoffTarget(t *testing.T) {
	e := newEnv(t, nil)
	var steps atomic.Int64
	c := newCounter(t, e, &steps)

	ask := tool.Must(agent.AsTool(c.Agent, &agent.SubagentOptions{Name: "count"}))
	var seen []string
	var mu sync.Mutex
	parent := serve(t, e, agent.Must(agent.New("parent", modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == model.RoleTool {
			mu.Lock()
			seen = append(seen, last.Text())
			mu.Unlock()
			return modeltest.Text("counted"), nil
		}
		return modeltest.ToolCalls(modeltest.Call("c1", "count", `{"input":"count me"}`)), nil
	}), &agent.Options{Tools: []tool.Tool{ask}})))
	out, err := parent.Run(runCtx(t), e.rt, "go", nil)
	if err != nil {
		t.Fatal(err)
	}
	if out.Output != "counted" || len(seen) != 1 || !strings.Contains(seen[0], `"last":"count me"`) {
		t.Errorf("parent said %q after the tool result %q; want the counter's output", out.Output, seen)
	}

	// Handoff: the triage agent's conversation goes to the counter.
	transfer := tool.Must(agent.Handoff(c.Agent, nil))
	triage := serve(t, e, agent.Must(agent.NewTyped[tallyOut]("triage", modeltest.FunctionModel(func(context.Context, *model.Request) (*model.Response, error) {
		return modeltest.ToolCalls(modeltest.Call("h1", transfer.Definition().Name, `{}`)), nil
	}), &agent.Options{Tools: []tool.Tool{transfer}})))
	hout, err := triage.Run(runCtx(t), e.rt, "please count", &agent.RunOptions{RunID: "h"})
	if err != nil {
		t.Fatal(err)
	}
	if hout.Agent != "counter" || hout.Output.Runs != 1 || hout.Output.Messages < 2 || hout.Output.Last == "" {
		t.Errorf("handoff answered by %s with %+v; want the counter, having seen the conversation", hout.Agent, hout.Output)
	}
	t.Logf("the counter saw %d messages after the handoff, the last %q", hout.Output.Messages, hout.Output.Last)
}

// A tool's EmitEvent shows in RunStream after its call, with the call's
// id.
func TestToolEmitEventInRunStream(t *testing.T) {
	e := newEnv(t, nil)
	progress, err := tool.New("work", "Works.", func(ctx context.Context, in struct{}) (string, error) {
		rc, _ := agent.FromContext(ctx)
		for i := range 2 {
			if err := rc.EmitEvent("progress", i); err != nil {
				return "", err
			}
		}
		return "done", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	a := serve(t, e, agent.Must(agent.New("worker", modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
		if req.Messages[len(req.Messages)-1].Role == model.RoleTool {
			return modeltest.Text("ok"), nil
		}
		return modeltest.ToolCalls(modeltest.Call("w1", "work", `{}`)), nil
	}), &agent.Options{Tools: []tool.Tool{progress}})))
	var got []string
	for ev, err := range a.RunStream(runCtx(t), e.rt, "go", &agent.RunOptions{RunID: "t"}) {
		if err != nil {
			t.Fatal(err)
		}
		s := string(ev.Kind)
		if ev.Custom != nil {
			s = fmt.Sprintf("custom:%s:%s:%s", ev.Custom.ToolCallID, ev.Custom.Type, ev.Custom.Data)
			if id := ev.Message.ID; !strings.HasPrefix(id, "t.custom.1.w1.") {
				t.Errorf("custom event id %q", id)
			}
		}
		got = append(got, s)
	}
	want := "input inference tool_call custom:w1:progress:0 custom:w1:progress:1 tool_result inference delta output"
	if strings.Join(got, " ") != want {
		t.Errorf("stream:\n got %s\nwant %s", strings.Join(got, " "), want)
	}
	// Outside a run there is nothing to emit on.
	if err := (agent.RunContext{}).EmitEvent("x", 1); err == nil {
		t.Error("EmitEvent outside a run: no error")
	}
}

// A fork from the end of a session takes its custom agents' state with
// it, independent from then on; a fork from an earlier message starts
// from the zero state; deleting a session deletes its agents' state.
func TestCustomAgentStateForkAndDelete(t *testing.T) {
	e := newEnv(t, nil)
	var steps atomic.Int64
	c := newCounter(t, e, &steps)
	ctx := runCtx(t)
	for _, p := range []string{"a", "b"} {
		if _, err := c.Run(ctx, e.rt, p, &agent.RunOptions{SessionID: "src"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := session.Fork(ctx, e.rt.Store(), "src", &session.ForkOptions{ID: "end"}); err != nil {
		t.Fatal(err)
	}
	if _, err := session.Fork(ctx, e.rt.Store(), "src", &session.ForkOptions{ID: "early", At: 2}); err != nil {
		t.Fatal(err)
	}
	out, err := c.Run(ctx, e.rt, "c", &agent.RunOptions{SessionID: "end"})
	if err != nil {
		t.Fatal(err)
	}
	early, err := c.Run(ctx, e.rt, "c", &agent.RunOptions{SessionID: "early"})
	if err != nil {
		t.Fatal(err)
	}
	src, _ := c.State(ctx, e.rt, "src")
	if out.Output.Runs != 3 || early.Output.Runs != 1 || src.Runs != 2 {
		t.Errorf("runs counted: fork from the end %d, early fork %d, source left at %d; want 3, 1, 2", out.Output.Runs, early.Output.Runs, src.Runs)
	}
	if err := session.Delete(ctx, e.rt.Store(), "end"); err != nil {
		t.Fatal(err)
	}
	if s, err := c.State(ctx, e.rt, "end"); err != nil || s.Runs != 0 {
		t.Errorf("state of a deleted session: %+v, %v", s, err)
	}
	if s, _ := c.State(ctx, e.rt, "src"); s.Runs != 2 {
		t.Errorf("deleting the fork changed its source: %+v", s)
	}
}

// A custom agent's state record that does not decode is an error matching
// ErrCorruptState in State, SetState and a run of the session, and
// SetState leaves it as it is rather than replacing it with a record that
// forgot the last step.
func TestCustomAgentCorruptState(t *testing.T) {
	e := newEnv(t, nil)
	var steps atomic.Int64
	c := newCounter(t, e, &steps)
	ctx := runCtx(t)
	const id = "2:s1/counter" // the state record of counter in session s1
	if _, err := e.store.Put(ctx, "agent_state", id, []byte(`{"state":`), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := c.State(ctx, e.rt, "s1"); !errors.Is(err, agent.ErrCorruptState) {
		t.Errorf("State of a corrupt record: %v; want ErrCorruptState", err)
	}
	if err := c.SetState(ctx, e.rt, "s1", tally{Runs: 7}); !errors.Is(err, agent.ErrCorruptState) {
		t.Errorf("SetState over a corrupt record: %v; want ErrCorruptState", err)
	}
	r, err := e.store.Get(ctx, "agent_state", id)
	if err != nil || string(r.Data) != `{"state":` {
		t.Errorf("the corrupt record after SetState: %q, %v; want it unchanged", r.Data, err)
	}
	if _, err := c.Run(ctx, e.rt, "one", &agent.RunOptions{SessionID: "s1"}); err == nil {
		t.Error("a run over a corrupt state record: no error")
	}
	if n := steps.Load(); n != 0 {
		t.Errorf("the step ran %d times over a corrupt state; want 0", n)
	}
}
