package runner_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/runner"
	"github.com/calf-go/calf/store"
	storemem "github.com/calf-go/calf/store/memory"
	"github.com/calf-go/calf/team"
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
	if _, ok := runner.Team(team.Must(team.NewSequential("t", []team.Member{team.AgentMember(a)}, nil))).(runner.Submitter); ok {
		t.Error("a team's runner claims to start runs")
	}
}
