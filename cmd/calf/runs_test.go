package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/adapters"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/internal/testwait"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/team"
	"github.com/calf-go/calf/tool"
	"github.com/calf-go/calf/workflow"
)

// calf runs lists the runs of a served agent and a team, and pause,
// resume and cancel act on them through the workers' broker.
func TestRunsCommands(t *testing.T) {
	isolate(t)
	ctx := t.Context()
	storeURL := "sqlite:" + filepath.Join(t.TempDir(), "calf.db")
	brokerURL := kafkaBrokerURL(t)
	st, err := adapters.OpenStore(ctx, storeURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	b, err := adapters.OpenBroker(ctx, brokerURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	c := calf.NewClient(b, nil)
	defer c.Close()
	rt := agent.NewRuntime(c, st, nil)

	// A looping agent: it calls tick until told to stop.
	var ticks, calls atomic.Int64
	tick := tool.Must(tool.New("tick", "Tick.", func(context.Context, struct{}) (string, error) {
		ticks.Add(1)
		time.Sleep(20 * time.Millisecond)
		return "tock", nil
	}))
	loop := agent.Must(agent.New("looper", modeltest.FunctionModel(func(context.Context, *model.Request) (*model.Response, error) {
		calls.Add(1)
		return modeltest.ToolCalls(modeltest.Call("", "tick", `{}`)), nil
	}), &agent.Options{Tools: []tool.Tool{tick}, MaxTurns: 1000}))
	if err := loop.Serve(ctx, rt, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := loop.Submit(ctx, rt, "loop", &agent.RunOptions{RunID: "loop-1"}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 20*time.Second, "the loop to tick 12 times", func() bool { return ticks.Load() >= 12 })

	p := runMain(ctx, "", "runs", "pause", "--broker", brokerURL, "--store", storeURL, "--reason", "too many ticks", "loop-1")
	if p.code != exitOK || !strings.Contains(p.stdout, "pause loop-1: agent looper") {
		t.Fatalf("calf runs pause = %+v", p)
	}
	waitStatus := func(id, want string) runSummary {
		t.Helper()
		var found runSummary
		testwait.ForErr(t, 20*time.Second, "run "+id+" "+want, func() error {
			l := runMain(ctx, "", "runs", "list", "--store", storeURL, "--json", "--agent", "looper")
			for line := range strings.SplitSeq(strings.TrimSpace(l.stdout), "\n") {
				var s runSummary
				if json.Unmarshal([]byte(line), &s) == nil && s.ID == id && s.Status == want {
					found = s
					return nil
				}
			}
			return fmt.Errorf("calf runs list = %+v", l)
		})
		return found
	}
	s := waitStatus("loop-1", "paused")
	if s.Reason != "too many ticks" || s.Kind != "agent" {
		t.Errorf("paused run listed as %+v", s)
	}
	// Listed paused, the run's step handler has declined its next model
	// call: none may come while the commands below look at the run.
	atPause := calls.Load()
	table := runMain(ctx, "", "runs", "list", "--store", storeURL, "--status", "paused")
	if table.code != exitOK || !strings.Contains(table.stdout, "loop-1") || !strings.Contains(table.stdout, "too many ticks") {
		t.Errorf("calf runs list --status paused = %+v", table)
	}
	show := runMain(ctx, "", "runs", "show", "--store", storeURL, "loop-1")
	var shown agent.RunInfo
	if show.code != exitOK || json.Unmarshal([]byte(show.stdout), &shown) != nil || !shown.Paused {
		t.Errorf("calf runs show = %+v", show)
	}
	// The whole conversation, though the record archived its start: the
	// prompt, then a call and its result per step before the current one.
	if rec, err := st.Get(ctx, store.KindRun, "loop-1"); err != nil || !strings.Contains(string(rec.Data), `"archived":`) {
		t.Errorf("the run's record archived none of its messages: %v", err)
	}
	if len(shown.Messages) < 2*shown.Step-1 || shown.Step < 12 || shown.Messages[0].Role != "user" {
		t.Errorf("calf runs show: %d messages at step %d", len(shown.Messages), shown.Step)
	}
	if calls.Load() != atPause {
		t.Errorf("the model was called while paused: %d, then %d", atPause, calls.Load())
	}

	r := runMain(ctx, "", "runs", "resume", "--broker", brokerURL, "--store", storeURL, "loop-1")
	if r.code != exitOK || !strings.Contains(r.stdout, "status: running") {
		t.Fatalf("calf runs resume = %+v", r)
	}
	testwait.For(t, 20*time.Second, "a model call of the resumed run", func() bool { return calls.Load() > atPause })
	x := runMain(ctx, "", "runs", "cancel", "--broker", brokerURL, "--store", storeURL, "loop-1")
	if x.code != exitOK || !strings.Contains(x.stdout, "status: cancelled") {
		t.Errorf("calf runs cancel = %+v", x)
	}
	if again := runMain(ctx, "", "runs", "pause", "--broker", brokerURL, "--store", storeURL, "loop-1"); again.code != exitFailure || !strings.Contains(again.stderr, "has ended") {
		t.Errorf("pause of an ended run = %+v", again)
	}

	// A team run: paused between its steps and resumed.
	release := make(chan struct{})
	first := agent.Must(agent.New("first", modeltest.FunctionModel(func(context.Context, *model.Request) (*model.Response, error) {
		<-release
		return modeltest.Text("one"), nil
	}), nil))
	second := agent.Must(agent.New("second", modeltest.FunctionModel(func(context.Context, *model.Request) (*model.Response, error) {
		return modeltest.Text("two"), nil
	}), nil))
	for _, a := range []*agent.Agent[string]{first, second} {
		if err := a.Serve(ctx, rt, nil); err != nil {
			t.Fatal(err)
		}
	}
	tm := team.Must(team.NewSequential("pair", []team.Member{team.AgentMember(first), team.AgentMember(second)}, nil))
	if err := tm.Serve(ctx, rt, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := tm.Submit(ctx, rt, "go", &team.RunOptions{RunID: "team-1"}); err != nil {
		t.Fatal(err)
	}
	waitTeam := func(id, want string) {
		t.Helper()
		testwait.ForErr(t, 20*time.Second, "team run "+id+" "+want, func() error {
			l := runMain(ctx, "", "runs", "list", "--store", storeURL, "--json", "--agent", "pair")
			if strings.Contains(l.stdout, `"id":"`+id+`"`) && strings.Contains(l.stdout, `"status":"`+want+`"`) {
				return nil
			}
			return fmt.Errorf("calf runs list = %+v", l)
		})
	}
	waitTeam("team-1", "running")
	if p := runMain(ctx, "", "runs", "pause", "--broker", brokerURL, "--store", storeURL, "team-1"); p.code != exitOK || !strings.Contains(p.stdout, "team pair") {
		t.Fatalf("calf runs pause (team) = %+v", p)
	}
	close(release)
	waitTeam("team-1", "paused")
	if r := runMain(ctx, "", "runs", "resume", "--broker", brokerURL, "--store", storeURL, "team-1"); r.code != exitOK {
		t.Fatalf("calf runs resume (team) = %+v", r)
	}
	waitTeam("team-1", "complete")

	// A workflow run: paused after its node in progress, shown, resumed.
	gate, hold := make(chan struct{}), make(chan struct{})
	entered := make(chan struct{}, 8) // a token each time node one starts
	wf := workflow.New[wfState]("steps", nil).
		Node("one", workflow.Func(func(ctx context.Context, s wfState) (wfState, error) {
			select {
			case entered <- struct{}{}:
			default:
			}
			wait := gate
			if s.Hold {
				wait = hold
			}
			select {
			case <-wait:
			case <-ctx.Done():
				return s, ctx.Err()
			}
			s.Done = append(s.Done, "one")
			return s, nil
		})).
		Node("two", workflow.Func(func(_ context.Context, s wfState) (wfState, error) {
			s.Done = append(s.Done, "two")
			return s, nil
		})).
		Edge(workflow.Start, "one").Edge("one", "two").Edge("two", workflow.End).MustBuild()
	if err := wf.Serve(ctx, rt, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := wf.Submit(ctx, rt, wfState{}, &workflow.RunOptions{RunID: "wf-1"}); err != nil {
		t.Fatal(err)
	}
	waitWorkflow := func(id, want string) {
		t.Helper()
		testwait.ForErr(t, 20*time.Second, "workflow run "+id+" "+want, func() error {
			l := runMain(ctx, "", "runs", "list", "--store", storeURL, "--json", "--agent", "steps")
			if strings.Contains(l.stdout, `"id":"`+id+`"`) && strings.Contains(l.stdout, `"status":"`+want+`"`) {
				return nil
			}
			return fmt.Errorf("calf runs list = %+v", l)
		})
	}
	waitWorkflow("wf-1", "running")
	// Node one is in progress: the pause takes effect after it, before
	// node two (paused before node one, the run would show node one).
	select {
	case <-entered:
	case <-ctx.Done():
		t.Fatal("node one never started")
	}
	if p := runMain(ctx, "", "runs", "pause", "--broker", brokerURL, "--store", storeURL, "--reason", "look first", "wf-1"); p.code != exitOK ||
		!strings.Contains(p.stdout, "workflow steps") || !strings.Contains(p.stdout, "status: pausing") {
		t.Fatalf("calf runs pause (workflow) = %+v", p)
	}
	close(gate)
	waitWorkflow("wf-1", "paused")
	if sh := runMain(ctx, "", "runs", "show", "--store", storeURL, "wf-1"); sh.code != exitOK || !strings.Contains(sh.stdout, `"workflow": "steps"`) ||
		!strings.Contains(sh.stdout, `"paused": true`) || !strings.Contains(sh.stdout, `"node": "two"`) {
		t.Errorf("calf runs show (paused workflow) = %+v", sh)
	}
	if r := runMain(ctx, "", "runs", "resume", "--broker", brokerURL, "--store", storeURL, "wf-1"); r.code != exitOK {
		t.Fatalf("calf runs resume (workflow) = %+v", r)
	}
	waitWorkflow("wf-1", "complete")
	if out, err := wf.Wait(ctx, rt, "wf-1"); err != nil || strings.Join(out.Done, " ") != "one two" {
		t.Errorf("workflow result %+v, %v", out, err)
	}
	// Another, cancelled while its first node runs: the worker that
	// serves the workflow carries out the request.
	if _, err := wf.Submit(ctx, rt, wfState{Hold: true}, &workflow.RunOptions{RunID: "wf-2"}); err != nil {
		t.Fatal(err)
	}
	waitWorkflow("wf-2", "running")
	if c := runMain(ctx, "", "runs", "cancel", "--broker", brokerURL, "--store", storeURL, "wf-2"); c.code != exitOK || !strings.Contains(c.stdout, "workflow steps") {
		t.Errorf("calf runs cancel (workflow) = %+v", c)
	}
	if _, err := wf.Wait(ctx, rt, "wf-2"); !errors.Is(err, agent.ErrRunCancelled) || !strings.Contains(err.Error(), "asked by calf runs cancel") {
		t.Errorf("cancelled workflow run: %v", err)
	}
	close(hold)
	waitWorkflow("wf-2", "cancelled")
	if bad := runMain(ctx, "", "runs", "show", "--store", storeURL, "nope"); bad.code != exitFailure || !strings.Contains(bad.stderr, "no such run: nope") {
		t.Errorf("calf runs show nope = %+v", bad)
	}
	if bad := runMain(ctx, "", "runs", "list", "--store", storeURL, "--status", "sleepy"); bad.code != exitUsage {
		t.Errorf("calf runs list --status sleepy = %+v", bad)
	}
}

// wfState is the state of the workflow TestRunsCommands pauses.
type wfState struct {
	Done []string `json:"done"`
	// Hold has the first node wait for the test's hold channel.
	Hold bool `json:"hold,omitempty"`
}

// calf runs list shows each run's session and prompt, the prompt on one
// line and cut short.
func TestRunsListPromptAndSession(t *testing.T) {
	isolate(t)
	srv, _ := newFakeServer(t)
	storeURL := "sqlite:" + filepath.Join(t.TempDir(), "calf.db")
	long := "Plan a day in Lyon\nwith a walk along the Saône, a bouchon for lunch and a museum after"
	mustRun(t, exitOK, "run", "--store", storeURL, "--model", srv.URL()+"#m", "--session", "trip", long)
	mustRun(t, exitOK, "run", "--store", storeURL, "--model", srv.URL()+"#m", "hello")
	got := mustRun(t, exitOK, "runs", "list", "--store", storeURL)
	lines := strings.Split(strings.TrimSpace(got.stdout), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "SESSION") || !strings.Contains(lines[0], "PROMPT") {
		t.Fatalf("calf runs list:\n%s", got.stdout)
	}
	// The newest first.
	if f := strings.Fields(lines[1]); !slices.Contains(f, "-") || !slices.Contains(f, "hello") {
		t.Errorf("the run without a session: %q", lines[1])
	}
	if !strings.Contains(lines[2], " trip ") || !strings.Contains(lines[2], "Plan a day in Lyon with a walk along th…") || strings.Contains(lines[2], "museum") {
		t.Errorf("the run in session trip: %q", lines[2])
	}
	js := mustRun(t, exitOK, "runs", "list", "--store", storeURL, "--json")
	if !strings.Contains(js.stdout, `"prompt":"hello"`) || !strings.Contains(js.stdout, `"session":"trip"`) {
		t.Errorf("calf runs list --json:\n%s", js.stdout)
	}
}

// calf runs signal sends a signal to a workflow run that waits for it,
// through the workers' broker; a run that has ended, and a value that is
// not JSON, are refused.
func TestRunsSignal(t *testing.T) {
	isolate(t)
	ctx := t.Context()
	storeURL := "sqlite:" + filepath.Join(t.TempDir(), "calf.db")
	brokerURL := kafkaBrokerURL(t)
	st, err := adapters.OpenStore(ctx, storeURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	b, err := adapters.OpenBroker(ctx, brokerURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	c := calf.NewClient(b, nil)
	defer c.Close()
	rt := agent.NewRuntime(c, st, nil)
	wf := workflow.New[wfState]("gated", nil).
		Node("gate", workflow.Func(func(ctx context.Context, s wfState) (wfState, error) {
			var v string
			if _, err := workflow.WaitSignal(ctx, "go", 0, &v); err != nil {
				return s, err
			}
			s.Done = append(s.Done, v)
			return s, nil
		})).
		Edge(workflow.Start, "gate").Edge("gate", workflow.End).MustBuild()
	if err := wf.Serve(ctx, rt, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := wf.Submit(ctx, rt, wfState{}, &workflow.RunOptions{RunID: "wf-g"}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 20*time.Second, "the run to wait for go", func() bool {
		info, err := wf.LoadRun(ctx, rt, "wf-g")
		return err == nil && info.WaitingFor == "go"
	})
	if r := runMain(ctx, "", "runs", "signal", "--broker", brokerURL, "--store", storeURL, "wf-g", "go", "now"); r.code != exitUsage || !strings.Contains(r.stderr, "not JSON") {
		t.Errorf("a value that is not JSON: %+v", r)
	}
	for i := range 2 { // sent again under its key: delivered once
		if r := runMain(ctx, "", "runs", "signal", "--broker", brokerURL, "--store", storeURL, "--idempotency-key", "k-1", "wf-g", "go", "now", "--text"); r.code != exitOK || !strings.Contains(r.stdout, "signal go to wf-g: workflow gated") {
			t.Fatalf("calf runs signal (%d) = %+v", i+1, r)
		}
	}
	if recs, err := st.List(ctx, "signal", "", "", 0); err != nil || len(recs) != 1 {
		t.Errorf("%d signals recorded (%v), want 1", len(recs), err)
	}
	if r := runMain(ctx, "", "runs", "signal", "--broker", brokerURL, "--store", storeURL, "--idempotency-key", "k-1", "wf-g", "go", `"other"`); r.code != exitFailure || !strings.Contains(r.stderr, "idempotency key") {
		t.Errorf("another signal under the key: %+v", r)
	}
	got, err := wf.Wait(ctx, rt, "wf-g")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Done, []string{"now"}) {
		t.Errorf("the run got %v, want [now]", got.Done)
	}
	if r := runMain(ctx, "", "runs", "signal", "--broker", brokerURL, "--store", storeURL, "wf-g", "go", `"again"`); r.code != exitFailure || !strings.Contains(r.stderr, "has ended") {
		t.Errorf("a signal to the ended run: %+v", r)
	}
}

// calf runs signal with no broker, against the SQLite file of a process
// that serves the run on a broker of its own (memory://, as calf run and
// calf serve do): the command can only record the signal, and the
// serving process finds it in the store and wakes the run.
func TestRunsSignalFromAnotherProcess(t *testing.T) {
	isolate(t)
	ctx := t.Context()
	storeURL := "sqlite:" + filepath.Join(t.TempDir(), "calf.db")
	st, err := adapters.OpenStore(ctx, storeURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	b, err := adapters.OpenBroker(ctx, "memory://", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	c := calf.NewClient(b, nil)
	defer c.Close()
	rt := agent.NewRuntime(c, st, nil)
	wf := workflow.New[wfState]("gated", nil).
		Node("gate", workflow.Func(func(ctx context.Context, s wfState) (wfState, error) {
			var v string
			if _, err := workflow.WaitSignal(ctx, "go", 0, &v); err != nil {
				return s, err
			}
			s.Done = append(s.Done, v)
			return s, nil
		})).
		Edge(workflow.Start, "gate").Edge("gate", workflow.End).MustBuild()
	if err := wf.Serve(ctx, rt, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := wf.Submit(ctx, rt, wfState{}, &workflow.RunOptions{RunID: "wf-m"}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 20*time.Second, "the run to wait for go", func() bool {
		info, err := wf.LoadRun(ctx, rt, "wf-m")
		return err == nil && info.WaitingFor == "go"
	})
	if r := runMain(ctx, "", "runs", "signal", "--store", storeURL, "wf-m", "go", `"now"`); r.code != exitOK || !strings.Contains(r.stdout, "recorded in the store") {
		t.Fatalf("calf runs signal: %+v", r)
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	out, err := wf.Wait(wctx, rt, "wf-m")
	if err != nil || !slices.Equal(out.Done, []string{"now"}) {
		t.Fatalf("run: %+v, %v", out, err)
	}
}
