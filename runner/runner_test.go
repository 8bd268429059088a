package runner_test

import (
	"context"
	"errors"
	"strings"
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
	a := agent.Must(agent.New[agent.NoDeps, out]("counter", m, &agent.Options[agent.NoDeps]{Description: "Counts."}))
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
	echo := agent.Must(agent.New[agent.NoDeps, string]("echo", modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
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
