package runner_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/internal/testwait"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/runner"
	"github.com/calf-go/calf/store"
	storemem "github.com/calf-go/calf/store/memory"
	"github.com/calf-go/calf/team"
	"github.com/calf-go/calf/tool"
	"github.com/calf-go/calf/workflow"
)

func newRuntime(t *testing.T) *agent.Runtime {
	t.Helper()
	b := memory.New(nil)
	c := calf.NewClient(b, nil)
	st := storemem.New()
	t.Cleanup(func() { _ = c.Close(); _ = b.Close(); _ = st.Close() })
	return agent.NewRuntime(c, st, nil)
}

type out struct {
	N int `json:"n"`
}

// An agent's run: progress, output (text and structured), status read back,
// failure as a result, cancellation, an unknown run.
func TestAgentRunner(t *testing.T) {
	rt := newRuntime(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	m := modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
		switch req.Messages[len(req.Messages)-1].Text() {
		case "fail":
			return nil, errors.New("no luck")
		case "wait":
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return modeltest.Text(`{"n": 7}`), nil
	})
	a := agent.Must(agent.NewTyped[out]("counter", m, &agent.Options{Description: "Counts."}))
	if err := a.Serve(ctx, rt, nil); err != nil {
		t.Fatal(err)
	}
	r := runner.Agent(a)
	var progress []string
	res, err := r.Run(ctx, rt, "count", &runner.Options{RunID: "r1"}, func(p runner.Progress) { progress = append(progress, p.Message+p.Delta) })
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != runner.Complete || res.RunID != "r1" || strings.ReplaceAll(string(res.Structured), " ", "") != `{"n":7}` || res.Text != string(res.Structured) {
		t.Errorf("result %+v", res)
	}
	if !strings.Contains(strings.Join(progress, ";"), "counter: model call 1") {
		t.Errorf("progress %q", progress)
	}
	got, err := r.Status(ctx, rt, "r1")
	if err != nil || got.Status != runner.Complete || strings.ReplaceAll(got.Text, " ", "") != `{"n":7}` {
		t.Errorf("status %+v, %v", got, err)
	}
	res, err = r.Run(ctx, rt, "fail", &runner.Options{RunID: "r2"}, nil)
	if err != nil || res.Status != runner.Failed || !strings.Contains(res.Error, "no luck") {
		t.Errorf("failed run: %+v, %v", res, err)
	}
	if got, _ := r.Status(ctx, rt, "r2"); got.Status != runner.Failed {
		t.Errorf("status of the failed run: %+v", got)
	}
	if err := r.Cancel(ctx, rt, "r3", "not wanted"); err != nil {
		t.Fatal(err)
	}
	if got, err := r.Status(ctx, rt, "r3"); err != nil || got.Status != runner.Cancelled {
		t.Errorf("status of a cancelled run: %+v, %v", got, err)
	}
	if _, err := r.Status(ctx, rt, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown run: %v", err)
	}
}

type doc struct {
	Text string `json:"text"`
}

// A team's and a workflow's runs, and their statuses read back.
func TestTeamAndWorkflowRunners(t *testing.T) {
	rt := newRuntime(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	echo := agent.Must(agent.New("echo", modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
		return modeltest.Text("echo: " + req.Messages[len(req.Messages)-1].Text()), nil
	}), nil))
	if err := echo.Serve(ctx, rt, nil); err != nil {
		t.Fatal(err)
	}
	tm := team.Must(team.NewSequential("echoes", []team.Member{team.AgentMember(echo)}, nil))
	if err := tm.Serve(ctx, rt, nil); err != nil {
		t.Fatal(err)
	}
	tr := runner.Team(tm)
	res, err := tr.Run(ctx, rt, "hi", &runner.Options{RunID: "t1"}, nil)
	if err != nil || res.Status != runner.Complete || res.Text != "echo: hi" {
		t.Fatalf("team: %+v, %v", res, err)
	}
	if got, err := tr.Status(ctx, rt, "t1"); err != nil || got.Text != "echo: hi" {
		t.Errorf("team status %+v, %v", got, err)
	}
	wf := workflow.New[doc]("bang", nil).
		Node("b", workflow.Func(func(_ context.Context, d doc) (doc, error) { d.Text += "!"; return d, nil })).
		Edge(workflow.Start, "b").Edge("b", workflow.End).MustBuild()
	if err := wf.Serve(ctx, rt, nil); err != nil {
		t.Fatal(err)
	}
	wr := runner.Workflow(wf, "Bangs.", func(p string) (doc, error) { return doc{Text: p}, nil }, func(d doc) (string, error) { return d.Text, nil })
	res, err = wr.Run(ctx, rt, "yo", &runner.Options{RunID: "w1"}, nil)
	if err != nil || res.Text != "yo!" {
		t.Fatalf("workflow: %+v, %v", res, err)
	}
	if got, err := wr.Status(ctx, rt, "w1"); err != nil || got.Text != "yo!" || wr.Description() != "Bangs." {
		t.Errorf("workflow status %+v, %v", got, err)
	}
}

// A thread sent whole reaches an agent's model before the prompt, and the
// run's usage comes back; teams and workflows refuse a thread.
func TestRunnerThreadAndUsage(t *testing.T) {
	rt := newRuntime(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var seen []string
	m := modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
		seen = seen[:0]
		for _, msg := range req.Messages {
			seen = append(seen, string(msg.Role)+":"+msg.Text())
		}
		r := modeltest.Text("ok")
		r.Usage = model.Usage{Requests: 1, InputTokens: 11, OutputTokens: 3, TotalTokens: 14}
		return r, nil
	})
	a := agent.Must(agent.New("threaded", m, nil))
	if err := a.Serve(ctx, rt, nil); err != nil {
		t.Fatal(err)
	}
	thread := []model.Message{model.UserMessage("my name is Ada"), {Role: model.RoleAssistant, Parts: []model.Part{model.TextPart("hello Ada")}}}
	res, err := runner.Agent(a).Run(ctx, rt, "what is my name?", &runner.Options{Thread: thread}, nil)
	if err != nil || res.Status != runner.Complete || res.Text != "ok" {
		t.Fatalf("run: %+v, %v", res, err)
	}
	if got := strings.Join(seen, "|"); !strings.Contains(got, "user:my name is Ada|assistant:hello Ada|user:what is my name?") {
		t.Errorf("the model saw %q", got)
	}
	if res.Usage.InputTokens != 11 || res.Usage.OutputTokens != 3 {
		t.Errorf("usage %+v", res.Usage)
	}

	tm := team.Must(team.NewSequential("pair", []team.Member{team.AgentMember(a)}, nil))
	if _, err := runner.Team(tm).Run(ctx, rt, "hi", &runner.Options{Thread: thread}, nil); !errors.Is(err, runner.ErrThread) {
		t.Errorf("team with a thread: %v", err)
	}
	wf := workflow.New[doc]("noop", nil).
		Node("n", workflow.Func(func(_ context.Context, d doc) (doc, error) { return d, nil })).
		Edge(workflow.Start, "n").Edge("n", workflow.End).MustBuild()
	wr := runner.Workflow(wf, "", func(p string) (doc, error) { return doc{Text: p}, nil }, func(d doc) (string, error) { return d.Text, nil })
	if _, err := wr.Run(ctx, rt, "hi", &runner.Options{Thread: thread}, nil); !errors.Is(err, runner.ErrThread) {
		t.Errorf("workflow with a thread: %v", err)
	}
}

// An agent's runner starts a run without waiting; the run streams.
func TestAgentSubmitter(t *testing.T) {
	rt := newRuntime(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	a := agent.Must(agent.New("starter", modeltest.NewTestModel(modeltest.Text("one two three")), nil))
	if err := a.Serve(ctx, rt, nil); err != nil {
		t.Fatal(err)
	}
	streamed := make(chan struct{})
	var once sync.Once
	if err := rt.Client().Handle(ctx, agent.StreamChannel("starter"), func(context.Context, *calf.Message) error {
		once.Do(func() { close(streamed) })
		return nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	s, ok := runner.Agent(a).(runner.Submitter)
	if !ok {
		t.Fatal("an agent's runner is not a Submitter")
	}
	id, err := s.Submit(ctx, rt, "go", &runner.Options{RunID: "s1"})
	if err != nil || id != "s1" {
		t.Fatalf("submit: %q %v", id, err)
	}
	out, err := a.Wait(ctx, rt, id)
	if err != nil {
		t.Fatal(err)
	}
	if out.Output != "one two three" {
		t.Fatalf("result: %+v", out)
	}
	// The deltas were published before the output; their handler may
	// come to them after Wait returns.
	select {
	case <-streamed:
	case <-ctx.Done():
		t.Error("the submitted run did not stream")
	}
	// A team's runner starts runs too (runner.Submitter's doc).
	if _, ok := runner.Team(team.Must(team.NewSequential("t", []team.Member{team.AgentMember(a)}, nil))).(runner.Submitter); !ok {
		t.Error("a team's runner does not start runs")
	}
}

// Runs of the three kinds paused and resumed through their runners: the
// step in progress finishes, the run waits (its status Waiting, "paused"
// in the listing), and once resumed it completes; an ended run cannot be
// paused.
func TestRunnerPauseAndResume(t *testing.T) {
	rt := newRuntime(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	// Each kind's first step blocks until its gate opens.
	gates := map[string]chan struct{}{"agent": make(chan struct{}), "team": make(chan struct{}), "workflow": make(chan struct{})}
	started := make(chan string, 8)
	var mu sync.Mutex
	block := func(kind string) {
		mu.Lock()
		g := gates[kind]
		gates[kind] = nil
		mu.Unlock()
		if g != nil {
			started <- kind
			select {
			case <-g:
			case <-ctx.Done():
			}
		}
	}
	opened := map[string]chan struct{}{}
	for k, g := range gates {
		opened[k] = g
	}
	// The agent's run calls a tool in its first step, so that it has a
	// second to pause before.
	m := modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
		last := req.Messages[len(req.Messages)-1]
		text := last.Text()
		switch {
		case text == "agent task":
			block("agent")
			return modeltest.ToolCalls(model.ToolCall{ID: "c1", Name: "noop", Arguments: "{}"}), nil
		case strings.HasPrefix(text, "team"):
			block("team")
		}
		return modeltest.Text("done: " + text), nil
	})
	noop := tool.Must(tool.New("noop", "Does nothing.", func(context.Context, struct{}) (string, error) { return "ok", nil }))
	a := agent.Must(agent.New("worker", m, &agent.Options{Tools: []tool.Tool{noop}}))
	if err := a.Serve(ctx, rt, nil); err != nil {
		t.Fatal(err)
	}
	tm := team.Must(team.NewSequential("pair", []team.Member{team.AgentMember(a), team.AgentMember(a)}, nil))
	if err := tm.Serve(ctx, rt, nil); err != nil {
		t.Fatal(err)
	}
	wf := workflow.New[doc]("steps", nil).
		Node("one", workflow.Func(func(_ context.Context, d doc) (doc, error) { block("workflow"); d.Text += "1"; return d, nil })).
		Node("two", workflow.Func(func(_ context.Context, d doc) (doc, error) { d.Text += "2"; return d, nil })).
		Edge(workflow.Start, "one").Edge("one", "two").Edge("two", workflow.End).MustBuild()
	if err := wf.Serve(ctx, rt, nil); err != nil {
		t.Fatal(err)
	}
	runners := map[string]runner.Runner{
		"agent":    runner.Agent(a),
		"team":     runner.Team(tm),
		"workflow": runner.Workflow(wf, "", func(p string) (doc, error) { return doc{Text: p}, nil }, func(d doc) (string, error) { return d.Text, nil }),
	}
	for _, kind := range []string{"agent", "team", "workflow"} {
		t.Run(kind, func(t *testing.T) {
			r, id := runners[kind], kind+"-run"
			done := make(chan *runner.Result, 1)
			go func() {
				res, err := r.Run(ctx, rt, kind+" task", &runner.Options{RunID: id}, nil)
				if err != nil {
					t.Error(err)
				}
				done <- res
			}()
			if got := <-started; got != kind {
				t.Fatalf("started %s", got)
			}
			if err := r.Pause(ctx, rt, id, "check"); err != nil {
				t.Fatal(err)
			}
			close(opened[kind])
			testwait.ForErr(t, 30*time.Second, "the run to pause", func() error {
				res, err := r.Status(ctx, rt, id)
				if err != nil {
					t.Fatal(err)
				}
				if res.Status.Ended() {
					t.Fatalf("the run ended while paused: %+v", res)
				}
				if res.Status != runner.Waiting {
					return fmt.Errorf("status %s", res.Status)
				}
				return nil
			})
			if s, err := runner.Summarize(ctx, rt.Store(), id); err != nil || s.Status != "paused" || s.Kind != kind || s.Reason != "check" {
				t.Errorf("summary: %+v, %v", s, err)
			}
			if err := r.Resume(ctx, rt, id); err != nil {
				t.Fatal(err)
			}
			res := <-done
			if res == nil || res.Status != runner.Complete {
				t.Fatalf("result %+v", res)
			}
			if err := r.Pause(ctx, rt, id, "late"); !errors.Is(err, agent.ErrRunEnded) {
				t.Errorf("pause of an ended run: %v", err)
			}
		})
	}
}
