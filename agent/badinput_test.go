package agent_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/internal/testwait"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/model/openai"
	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/tool"
)

// oneCall returns a model that makes one tool call and then answers with
// the text of the tool message it got back.
func oneCall(name, args string) *modeltest.TestModel {
	return modeltest.NewTestModel(
		modeltest.ToolCalls(modeltest.Call("c1", name, args)),
		func(_ context.Context, req *model.Request) (*model.Response, error) {
			return modeltest.Text("saw: " + req.Messages[len(req.Messages)-1].Text()), nil
		},
	)
}

// Bad tool calls from the model come back to it as error results; the run
// goes on and the tool is not executed.
func TestBadToolCallsGoBackToTheModel(t *testing.T) {
	tests := []struct {
		name, tool, args, want string
	}{
		{"malformed arguments", "add", `{"a": 2,`, "not valid JSON"},
		{"unknown tool", "multiply", `{"a":2,"b":3}`, `unknown tool "multiply"; the tools are: add`},
		{"arguments failing the schema", "add", `{"a":"two","b":3}`, `invalid arguments for tool "add"`},
		{"missing required argument", "add", `{"a":2}`, "b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nil)
			add, executions := addTool(t)
			m := oneCall(tt.tool, tt.args)
			a, err := agent.New("calc", m, &agent.Options{Tools: []tool.Tool{add}})
			if err != nil {
				t.Fatal(err)
			}
			if err := a.Serve(t.Context(), e.rt, nil); err != nil {
				t.Fatal(err)
			}
			out, err := a.Run(runCtx(t), e.rt, "add", nil)
			if err != nil {
				t.Fatal(err)
			}
			if executions.Load() != 0 {
				t.Errorf("the tool ran %d times on bad input", executions.Load())
			}
			if !strings.Contains(out.Output, tt.want) {
				t.Errorf("the model saw %q, want it to contain %q", out.Output, tt.want)
			}
			if len(out.ToolCalls) != 1 || out.ToolCalls[0].Status != agent.StatusError {
				t.Errorf("tool calls = %+v", out.ToolCalls)
			}
			req := m.Requests()[1]
			if last := req.Messages[len(req.Messages)-1]; last.Role != model.RoleTool || !last.IsError || last.ToolCallID != "c1" {
				t.Errorf("the tool message is %+v", last)
			}
		})
	}
}

func TestToolFailuresGoBackToTheModel(t *testing.T) {
	tests := []struct {
		name string
		fn   func(ctx context.Context, in struct{}) (string, error)
		want string
	}{
		{"error", func(context.Context, struct{}) (string, error) { return "", errors.New("disk on fire") }, "disk on fire"},
		{"panic", func(context.Context, struct{}) (string, error) { panic("nil map") }, `tool "flaky" panicked: nil map`},
		{"timeout", func(ctx context.Context, _ struct{}) (string, error) {
			<-ctx.Done()
			return "", ctx.Err()
		}, `tool "flaky" timed out after 50ms`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nil)
			flaky := tool.Must(tool.New("flaky", "Fails.", tt.fn))
			a, err := agent.New("calc", oneCall("flaky", `{}`), &agent.Options{
				Tools: []tool.Tool{flaky}, ToolTimeout: 50 * time.Millisecond,
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := a.Serve(t.Context(), e.rt, nil); err != nil {
				t.Fatal(err)
			}
			out, err := a.Run(runCtx(t), e.rt, "go", nil)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out.Output, tt.want) {
				t.Errorf("the model saw %q, want %q", out.Output, tt.want)
			}
		})
	}
}

// A tool that ignores its context does not hold the run past its timeout:
// the model gets a timeout error for the call, and what the tool returns
// later is dropped and counted, never recorded as the call's result.
func TestToolThatIgnoresItsContextTimesOut(t *testing.T) {
	e := newEnv(t, nil)
	release := make(chan struct{})
	returned := make(chan struct{})
	stubborn := tool.Must(tool.New("stubborn", "Ignores its context.", func(context.Context, struct{}) (string, error) {
		defer close(returned)
		<-release // until the test says so, whatever the context says
		return "late success", nil
	}))
	a, err := agent.New("calc", oneCall("stubborn", `{}`), &agent.Options{
		Tools: []tool.Tool{stubborn}, ToolTimeout: 50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Serve(t.Context(), e.rt, nil); err != nil {
		t.Fatal(err)
	}
	// The run ends while the tool is still blocked: it did not wait for it.
	out, err := a.Run(runCtx(t), e.rt, "go", &agent.RunOptions{RunID: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	if want := `tool "stubborn" timed out after 50ms`; !strings.Contains(out.Output, want) {
		t.Errorf("the model saw %q, want %q", out.Output, want)
	}
	if n := e.rt.LateToolResults(); n != 0 {
		t.Errorf("late results before the tool returned: %d", n)
	}
	close(release)
	<-returned
	testwait.For(t, 10*time.Second, "one late result", func() bool { return e.rt.LateToolResults() >= 1 })
	if n := e.rt.LateToolResults(); n != 1 {
		t.Fatalf("late results = %d, want 1", n)
	}
	e.settle(t)
	got, err := a.Wait(runCtx(t), e.rt, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.ToolCalls) != 1 || got.ToolCalls[0].Status != agent.StatusError || strings.Contains(got.ToolCalls[0].Result.Text(), "late success") {
		t.Errorf("recorded tool calls: %+v, want the timeout error only", got.ToolCalls)
	}
}

// A model that answers HTTP 500 once is retried by the model adapter, and
// the run completes.
func TestModelServerErrorIsRetried(t *testing.T) {
	e := newEnv(t, nil)
	srv := modeltest.NewServer(func(_ context.Context, req *model.Request) (*model.Response, error) {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == model.RoleTool {
			return modeltest.Text("The sum is " + last.Text()), nil
		}
		return modeltest.ToolCalls(modeltest.Call("call_1", "add", `{"a":2,"b":3}`)), nil
	})
	defer srv.Close()
	m, err := openai.New(openai.Options{Model: "fake", BaseURL: srv.URL(), APIKey: "k", MaxRetries: 2})
	if err != nil {
		t.Fatal(err)
	}
	add, _ := addTool(t)
	a, err := agent.New("calc", m, &agent.Options{Tools: []tool.Tool{add}})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Serve(t.Context(), e.rt, nil); err != nil {
		t.Fatal(err)
	}
	srv.FailNext(1, 500)
	out, err := a.Run(runCtx(t), e.rt, "add 2 and 3", nil)
	if err != nil {
		t.Fatal(err)
	}
	if out.Output != "The sum is 5" || srv.Requests() != 3 {
		t.Fatalf("output %q after %d requests; want the sum after 3", out.Output, srv.Requests())
	}
}

// A model that keeps failing ends the run with a clear error.
func TestModelFailureEndsTheRun(t *testing.T) {
	e := newEnv(t, nil)
	m := modeltest.FunctionModel(func(context.Context, *model.Request) (*model.Response, error) {
		return nil, &model.StatusError{Provider: "fake", StatusCode: 401, Message: "bad key"}
	})
	a := agent.Must(agent.New("calc", m, nil))
	if err := a.Serve(t.Context(), e.rt, nil); err != nil {
		t.Fatal(err)
	}
	_, err := a.Run(runCtx(t), e.rt, "hi", nil)
	var re *agent.RunError
	if !errors.As(err, &re) || re.Status != agent.RunFailed || !strings.Contains(re.Reason, "HTTP 401: bad key") {
		t.Fatalf("err = %v", err)
	}
}

// A model that never answers is cut off by the model timeout.
func TestModelTimeout(t *testing.T) {
	e := newEnv(t, nil)
	m := modeltest.FunctionModel(func(ctx context.Context, _ *model.Request) (*model.Response, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	a := agent.Must(agent.New("sleepy", m, &agent.Options{ModelTimeout: 100 * time.Millisecond}))
	if err := a.Serve(t.Context(), e.rt, nil); err != nil {
		t.Fatal(err)
	}
	_, err := a.Run(runCtx(t), e.rt, "hi", nil)
	if !errors.Is(err, agent.ErrRunFailed) || !strings.Contains(err.Error(), "model call timed out after 100ms") {
		t.Fatalf("err = %v", err)
	}
}

// A cancelled context stops the run, and the run's state says so.
func TestCancelledRun(t *testing.T) {
	e := newEnv(t, nil)
	started := make(chan struct{})
	var calls atomic.Int64
	m := modeltest.FunctionModel(func(ctx context.Context, _ *model.Request) (*model.Response, error) {
		if calls.Add(1) == 1 {
			close(started)
		}
		<-ctx.Done()
		return nil, ctx.Err()
	})
	a := agent.Must(agent.New("slow", m, &agent.Options{ModelTimeout: 300 * time.Millisecond}))
	if err := a.Serve(t.Context(), e.rt, nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	go func() { <-started; cancel() }()
	_, err := a.Run(ctx, e.rt, "hi", &agent.RunOptions{RunID: "c1"})
	if !errors.Is(err, agent.ErrRunCancelled) || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want ErrRunCancelled and context.Canceled", err)
	}
	e.settle(t) // the model call times out and its handler finds the run cancelled
	st, err := e.rt.LoadState(t.Context(), "c1")
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != agent.RunCancelled || !strings.Contains(st.Error, "stopped waiting") {
		t.Fatalf("state: %s %q", st.Status, st.Error)
	}
	if calls.Load() != 1 {
		t.Fatalf("model called %d times", calls.Load())
	}
}

func TestMaxTurns(t *testing.T) {
	e := newEnv(t, nil)
	add, _ := addTool(t)
	m := modeltest.FunctionModel(func(context.Context, *model.Request) (*model.Response, error) {
		return modeltest.ToolCalls(modeltest.Call("", "add", `{"a":1,"b":1}`)), nil
	})
	a := agent.Must(agent.New("loop", m, &agent.Options{Tools: []tool.Tool{add}, MaxTurns: 3}))
	if err := a.Serve(t.Context(), e.rt, nil); err != nil {
		t.Fatal(err)
	}
	_, err := a.Run(runCtx(t), e.rt, "loop", nil)
	if !errors.Is(err, agent.ErrRunFailed) || !strings.Contains(err.Error(), "more than 3 model calls") {
		t.Fatalf("err = %v", err)
	}
}

// Payloads over the size limit are refused with a clear error; a tool
// result over the limit goes back to the model as an error.
func TestPayloadLimits(t *testing.T) {
	e := newEnv(t, &envOptions{maxSize: 8 << 10})
	big := tool.Must(tool.New("big", "Returns a lot.", func(context.Context, struct{}) (string, error) {
		return strings.Repeat("x", 64<<10), nil
	}))
	a := agent.Must(agent.New("big", oneCall("big", `{}`), &agent.Options{Tools: []tool.Tool{big}}))
	if err := a.Serve(t.Context(), e.rt, nil); err != nil {
		t.Fatal(err)
	}
	_, err := a.Run(runCtx(t), e.rt, strings.Repeat("y", 16<<10), nil)
	if !errors.Is(err, calf.ErrMessageTooLarge) {
		t.Fatalf("oversized prompt: %v", err)
	}
	out, err := a.Run(runCtx(t), e.rt, "go", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.Output, "exceeds the message size limit of 8192 bytes") {
		t.Fatalf("the model saw %q", out.Output)
	}
}

// A message that can never be handled is parked on the dead-letter channel,
// visibly, and other runs go on.
func TestPoisonMessagesAreDeadLettered(t *testing.T) {
	e := newEnv(t, nil)
	a, _, _ := newW1(t, e)
	dead := make(chan calf.DeadLetter, 4)
	if err := e.client.Handle(t.Context(), calf.DeadLetterChannel, func(_ context.Context, m *calf.Message) error {
		var dl calf.DeadLetter
		if err := m.Decode(&dl); err != nil {
			return calf.Permanent(err)
		}
		dead <- dl
		return nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	poison := &calf.Message{ID: "poison-1", Channel: agent.InputChannel("calculator"), Key: "p1", Data: []byte(`{"content": 42`),
		Metadata: calf.Metadata{RunID: "p1", CorrelationID: "p1"}}
	if err := e.client.Publish(t.Context(), poison); err == nil {
		t.Fatal("the client published data that is not JSON")
	}
	// A producer that does not check (another language, another client)
	// gets it onto the broker.
	if err := e.broker.Publish(t.Context(), poison); err != nil {
		t.Fatal(err)
	}
	select {
	case dl := <-dead:
		if dl.Message.ID != "poison-1" || string(dl.RawData) != `{"content": 42` || dl.Attempts != 1 || !dl.Permanent || dl.Group != agent.InputChannel("calculator") || !strings.Contains(dl.Error, "decode") {
			t.Errorf("dead letter = %+v", dl)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the poison message was not dead-lettered")
	}
	out, err := a.Run(runCtx(t), e.rt, "add 2 and 3", nil)
	if err != nil || out.Output != "The sum is 5" {
		t.Fatalf("a run after the poison message: %v %v", out, err)
	}
}

// failingStore fails every write, as a store that is down would.
type failingStore struct {
	store.Store
	writes atomic.Int64
}

func (s *failingStore) Put(context.Context, string, string, []byte, int64) (int64, error) {
	s.writes.Add(1)
	return 0, errors.New("store unreachable")
}

// A message whose handling keeps failing is retried a bounded number of
// times, then parked with its attempts counted.
func TestFailingStoreDeadLettersAfterMaxAttempts(t *testing.T) {
	e := newEnv(t, nil)
	fs := &failingStore{Store: e.store}
	rt := agent.NewRuntime(e.client, fs, nil)
	a := agent.Must(agent.New("down", modeltest.NewTestModel(modeltest.Text("hi")), nil))
	if err := a.Serve(t.Context(), rt, nil); err != nil {
		t.Fatal(err)
	}
	dead := make(chan calf.DeadLetter, 1)
	if err := e.client.Handle(t.Context(), calf.DeadLetterChannel, func(_ context.Context, m *calf.Message) error {
		var dl calf.DeadLetter
		_ = m.Decode(&dl)
		dead <- dl
		return nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	_, err := a.Run(ctx, rt, "hi", nil)
	if !errors.Is(err, agent.ErrRunParked) {
		t.Fatalf("err = %v, want ErrRunParked", err)
	}
	select {
	case dl := <-dead:
		if dl.Attempts != 3 || dl.Permanent || !strings.Contains(dl.Error, "store unreachable") {
			t.Errorf("dead letter = %+v", dl)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("nothing was dead-lettered")
	}
	if fs.writes.Load() < 3 {
		t.Errorf("writes attempted: %d", fs.writes.Load())
	}
}
