package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/agent/approval"
	"github.com/calf-go/calf/agent/session"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/runner"
	"github.com/calf-go/calf/store"
	storemem "github.com/calf-go/calf/store/memory"
	"github.com/calf-go/calf/tool"
)

// storedRecord is a record of testdata/records: kind, id and data as the
// code before the run view (RunInfo) wrote them; see
// testdata/records/README.md.
type storedRecord struct {
	Kind string          `json:"kind"`
	ID   string          `json:"id"`
	Data json.RawMessage `json:"data"`
}

// storedEnv is a runtime on a store holding the records of the fixture
// name.
func storedEnv(t *testing.T, name string) (*agent.Runtime, store.Store) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "records", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var recs []storedRecord
	if err := json.Unmarshal(data, &recs); err != nil {
		t.Fatal(err)
	}
	s := storemem.New()
	for _, r := range recs {
		if _, err := s.Put(t.Context(), r.Kind, r.ID, r.Data, 0); err != nil {
			t.Fatal(err)
		}
	}
	c := calf.NewClient(memory.New(nil), nil)
	t.Cleanup(func() { c.Shutdown(context.Background()) })
	return agent.NewRuntime(c, s, nil), s
}

// fixtureDeps are the dependencies the fixtures' runs were given, read
// through a handle by this version's tools.
type fixtureDeps struct {
	Prefix string `json:"prefix"`
}

type fixtureReport struct {
	City  string `json:"city"`
	Score int    `json:"score"`
}

func lastText(_ context.Context, req *model.Request) (*model.Response, error) {
	return modeltest.Text("saw: " + req.Messages[len(req.Messages)-1].Text()), nil
}

// Records written by the code before the run view are read by this one:
// every run of the fixtures has a view (from its record alone, and whole),
// is listed and summarized, and the runs that had not ended go on to their
// end here, their dependencies decoded by this version's handle.
func TestStoredRecords(t *testing.T) {
	ctx := t.Context()
	whole := func(t *testing.T, rt *agent.Runtime, id string) *agent.RunInfo {
		t.Helper()
		info, err := rt.LoadAgentRun(ctx, id)
		if err != nil {
			t.Fatalf("LoadRun(%s): %v", id, err)
		}
		if info.Partial || info.ID != id {
			t.Fatalf("LoadRun(%s): partial %v, id %q", id, info.Partial, info.ID)
		}
		return info
	}
	listed := func(t *testing.T, s store.Store, want ...string) {
		t.Helper()
		runs, err := runner.Runs(ctx, s, &runner.RunFilter{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range runs {
			got = append(got, r.ID+"="+r.Status)
		}
		for _, w := range want {
			if !strings.Contains(" "+strings.Join(got, " ")+" ", " "+w+" ") {
				t.Errorf("runner.Runs = %v, want %s among them", got, w)
			}
		}
	}

	t.Run("complete", func(t *testing.T) {
		rt, s := storedEnv(t, "complete")
		info := whole(t, rt, "run-complete")
		if info.Status != agent.RunComplete || info.Agent != "echo" || info.Step != 2 || len(info.Messages) != 4 ||
			string(info.Output) != `"saw: run:hi"` || len(info.ToolCalls) != 1 || info.ToolCalls[0].Result.Text() != "run:hi" ||
			info.Usage.Requests != 2 || info.StartedAt.IsZero() || info.EndedAt.Before(info.StartedAt) {
			t.Errorf("run-complete: %+v", info)
		}
		typed := agent.Must(agent.NewTyped[fixtureReport]("reporter", nil, nil))
		out, err := typed.Wait(ctx, rt, "run-structured")
		if err != nil || out.Output != (fixtureReport{City: "Paris", Score: 7}) {
			t.Errorf("Result(run-structured) = %+v, %v", out, err)
		}
		if info := whole(t, rt, "run-failed"); info.Status != agent.RunFailed || !strings.Contains(info.Error, "the model refused") {
			t.Errorf("run-failed: %+v", info)
		}
		listed(t, s, "run-complete=complete", "run-structured=complete", "run-failed=failed")
	})

	t.Run("session", func(t *testing.T) {
		rt, s := storedEnv(t, "session")
		info := whole(t, rt, "run-session-3")
		if len(info.Messages) != 6 || info.HistoryLen != 4 || info.Messages[0].Text() != "first" || info.Own != 2 ||
			info.NewMessages()[0].Text() != "third" || info.SessionID != "s1" {
			t.Errorf("run-session-3: %d messages, history %d, own %d: %+v", len(info.Messages), info.HistoryLen, info.Own, info.Messages)
		}
		rec, err := s.Get(ctx, store.KindRun, "run-session-3")
		if err != nil {
			t.Fatal(err)
		}
		bare, err := agent.DecodeRunInfo(rec.Data)
		if err != nil || !bare.Partial || len(bare.Messages) != 2 || bare.HistoryLen != 0 || bare.Own != 2 {
			t.Errorf("DecodeRunInfo(run-session-3) = %+v, %v", bare, err)
		}
		// The session reads through package session as stored.
		stored, err := session.Load(ctx, s, "s1")
		if err != nil || len(stored.Messages) != 6 || len(stored.Runs) != 3 || stored.Messages[0].Text() != "first" {
			t.Fatalf("session s1 as stored: %+v, %v", stored, err)
		}
		if page, err := session.List(ctx, s, nil); err != nil || len(page.Sessions) != 1 || page.Sessions[0].ID != "s1" || page.Sessions[0].Messages != 6 {
			t.Errorf("the stored sessions listed: %+v, %v", page, err)
		}
		// The session goes on: this version's next run sees its history.
		var seen int
		chat := agent.Must(agent.New("chat", modeltest.FunctionModel(func(ctx context.Context, req *model.Request) (*model.Response, error) {
			seen = len(req.Messages)
			return lastText(ctx, req)
		}), &agent.Options{Instructions: "Chat."}))
		if err := chat.Serve(ctx, rt, nil); err != nil {
			t.Fatal(err)
		}
		out, err := chat.Run(ctx, rt, "fourth", &agent.RunOptions{SessionID: "s1"})
		if err != nil || out.Output != "saw: fourth" || seen != 1+6+1 {
			t.Errorf("a run continuing the stored session: %+v, %v; the model saw %d messages, want 8", out, err, seen)
		}
		listed(t, s, "run-session-1=complete", "run-session-2=complete", "run-session-3=complete")
	})

	t.Run("archived", func(t *testing.T) {
		rt, s := storedEnv(t, "archived")
		info := whole(t, rt, "run-archived")
		if len(info.Messages) != 2+42 || info.HistoryLen != 2 || info.Own != 42 || len(info.ToolCalls) != 20 ||
			info.Messages[0].Text() != "hello" || info.Messages[2].Text() != "tick twenty times" || info.Step != 21 {
			t.Errorf("run-archived: %d messages, history %d, own %d, %d tool calls, step %d", len(info.Messages), info.HistoryLen, info.Own, len(info.ToolCalls), info.Step)
		}
		for i, c := range info.ToolCalls {
			if c.Step != i+1 || c.Name != "tick" {
				t.Errorf("tool call %d: %+v", i, c)
			}
		}
		rec, err := s.Get(ctx, store.KindRun, "run-archived")
		if err != nil {
			t.Fatal(err)
		}
		bare, err := agent.DecodeRunInfo(rec.Data)
		if err != nil || !bare.Partial || bare.Own != 42 || len(bare.Messages) != 10 || len(bare.ToolCalls) != 12 {
			t.Errorf("DecodeRunInfo(run-archived): %v; partial %v, own %d, %d messages, %d tool calls", err, bare.Partial, bare.Own, len(bare.Messages), len(bare.ToolCalls))
		}
		listed(t, s, "run-archived=complete", "run-greet=complete")
	})

	t.Run("handoff", func(t *testing.T) {
		rt, s := storedEnv(t, "handoff")
		info := whole(t, rt, "run-triage")
		if info.Status != agent.RunHandedOff || info.HandedOffTo == nil || info.HandedOffTo.RunID != "run-triage.handoff.1" {
			t.Errorf("run-triage: %+v", info)
		}
		if last := whole(t, rt, "run-triage.handoff.1"); len(last.Chain) != 1 || last.Chain[0].RunID != "run-triage" {
			t.Errorf("the chain's last run: chain %+v", last.Chain)
		}
		triage := agent.Must(agent.New("triage", nil, nil))
		out, err := triage.Wait(ctx, rt, "run-triage")
		if err != nil || out.Output != "Refunded." {
			t.Errorf("Result(run-triage) = %+v, %v", out, err)
		}
		listed(t, s, "run-triage=handed_off", "run-triage.handoff.1=complete")
	})

	t.Run("in flight", func(t *testing.T) {
		rt, s := storedEnv(t, "in_flight")
		if info := whole(t, rt, "run-paused"); !info.Paused || info.Pause == nil || info.Pause.Reason != "for the fixture" || info.Status != agent.RunRunning {
			t.Errorf("run-paused: %+v", info)
		}
		if info := whole(t, rt, "run-cancelled"); info.Status != agent.RunCancelled || info.Error != "for the fixture" {
			t.Errorf("run-cancelled: %+v", info)
		}
		if info := whole(t, rt, "run-in-flight"); info.Status != agent.RunRunning || info.Paused {
			t.Errorf("run-in-flight: %+v", info)
		}
		listed(t, s, "run-paused=paused", "run-cancelled=cancelled", "run-in-flight=running")

		var deps agent.Deps[fixtureDeps]
		echo := tool.Must(tool.New("echo", "Echo with the prefix.", func(ctx context.Context, in echoArgs) (string, error) {
			d, err := deps.Of(ctx)
			return d.Prefix + in.Text, err
		}))
		pending := agent.Must(agent.New("pending", modeltest.FunctionModel(lastText), &agent.Options{Tools: []tool.Tool{echo}}))
		if err := pending.Serve(ctx, rt, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := pending.Recover(ctx, rt, nil); err != nil {
			t.Fatal(err)
		}
		out, err := pending.Wait(runCtx(t), rt, "run-in-flight")
		if err != nil || out.Output != "saw: old:hi" {
			t.Errorf("the run in flight, recovered: %+v, %v; want the tool to read the deps it was given", out, err)
		}
		if _, err := rt.Resume(ctx, agent.RunRef{Name: "pending", RunID: "run-paused"}); err != nil {
			t.Fatal(err)
		}
		out, err = pending.Wait(runCtx(t), rt, "run-paused")
		if err != nil || out.Output != "saw: paused:hi" {
			t.Errorf("the paused run, resumed: %+v, %v", out, err)
		}
	})
	t.Run("approval", func(t *testing.T) {
		rt, s := storedEnv(t, "approval")
		hook := approval.HookDecision{Hook: "loud", Event: "pre_tool_use", Action: "transform", Reason: "louder", Arguments: json.RawMessage(`{"text":"hi!"}`)}
		done, err := approval.Get(ctx, s, "run-answered/c1")
		if err != nil {
			t.Fatal(err)
		}
		if done.ID != approval.ID("run-answered", "c1") || done.Agent != "guarded" || done.RunID != "run-answered" || done.Step != 1 ||
			done.ToolName != "echo" || done.ToolKind != tool.KindExecute || compactJSON(t, done.Arguments) != `{"text":"hi!"}` ||
			done.Digest != approval.Digest("echo", []byte(compactJSON(t, done.Arguments))) || done.Status != approval.Approved ||
			done.Message != "fine, edited" || compactJSON(t, done.ApprovedArguments) != `{"text":"edited"}` ||
			len(done.Hooks) != 1 || done.Hooks[0].Hook != hook.Hook || done.Hooks[0].Event != hook.Event || done.Hooks[0].Action != hook.Action ||
			done.Hooks[0].Reason != hook.Reason || compactJSON(t, done.Hooks[0].Arguments) != `{"text":"hi!"}` ||
			!done.ExpiresAt.Equal(done.RequestedAt.Add(time.Hour)) || done.AnsweredAt.Before(done.RequestedAt) || done.ForSession {
			t.Errorf("the answered request: %+v", done)
		}
		if info := whole(t, rt, "run-answered"); info.Status != agent.RunComplete || string(info.Output) != `"saw: answered:edited"` {
			t.Errorf("run-answered: %+v", info)
		}
		reqs, err := approval.List(ctx, s, "run-waiting", approval.Pending)
		if err != nil || len(reqs) != 1 {
			t.Fatalf("the pending requests of run-waiting: %+v, %v", reqs, err)
		}
		req := reqs[0]
		if req.SessionID != "s3" || req.CorrelationID != "run-waiting" || !strings.Contains(req.Reason, "asks before execute tools") ||
			len(req.Hooks) != 1 || req.Hooks[0].Action != "transform" || !req.AnsweredAt.IsZero() || !req.ExpiresAt.IsZero() {
			t.Errorf("the pending request: %+v", req)
		}
		if all, err := approval.List(ctx, s, "", ""); err != nil || len(all) != 2 {
			t.Errorf("every request: %+v, %v", all, err)
		}
		if info := whole(t, rt, "run-waiting"); info.Status != agent.RunRunning || len(info.ToolCalls) != 0 {
			t.Errorf("run-waiting: %+v", info)
		}

		// This version's agent carries out an answer given now, with the
		// arguments the hook left and the deps the run was given, and
		// allows the tool for the session.
		var deps agent.Deps[fixtureDeps]
		echo := tool.Must(tool.New("echo", "Echo with the prefix.", func(ctx context.Context, in echoArgs) (string, error) {
			d, err := deps.Of(ctx)
			return d.Prefix + in.Text, err
		}))
		guarded := agent.Must(agent.New("guarded", modeltest.FunctionModel(lastText), &agent.Options{
			Tools: []tool.Tool{echo}, Permissions: &agent.Permissions{Mode: agent.PermissionAsk},
		}))
		if err := guarded.Serve(ctx, rt, nil); err != nil {
			t.Fatal(err)
		}
		answered, err := approval.Respond(ctx, s, rt.Client(), req.ID, approval.Answer{Approve: true, ForSession: true, Digest: req.Digest})
		if err != nil || answered.Status != approval.Approved || !answered.ForSession {
			t.Fatalf("Respond: %+v, %v", answered, err)
		}
		out, err := guarded.Wait(runCtx(t), rt, "run-waiting")
		if err != nil || out.Output != "saw: waited:hi!" {
			t.Errorf("the waiting run, answered: %+v, %v", out, err)
		}
		if sess, err := session.Load(ctx, s, "s3"); err != nil || len(sess.AllowedTools) != 1 || sess.AllowedTools[0] != "echo" {
			t.Errorf("session s3 after an answer for the session: %+v, %v", sess, err)
		}
		if _, err := approval.Respond(ctx, s, rt.Client(), req.ID, approval.Answer{Approve: true, Digest: req.Digest}); !errors.Is(err, approval.ErrAnswered) {
			t.Errorf("a second answer: %v", err)
		}
	})

	t.Run("custom", func(t *testing.T) {
		rt, s := storedEnv(t, "custom")
		type tally struct {
			Runs    int      `json:"runs"`
			Prompts []string `json:"prompts"`
		}
		var seen tally
		counter := agent.Must(agent.NewCustom("counter", func(sc *agent.StepContext[tally], in []model.Message) (string, error) {
			seen = *sc.State
			sc.State.Runs++
			sc.State.Prompts = append(sc.State.Prompts, in[len(in)-1].Text())
			return "counted", nil
		}, nil))
		if st, err := counter.State(ctx, rt, "s4"); err != nil || st.Runs != 2 || strings.Join(st.Prompts, ",") != "one,two" {
			t.Errorf("the stored state: %+v, %v", st, err)
		}
		if err := counter.Serve(ctx, rt, nil); err != nil {
			t.Fatal(err)
		}
		out, err := counter.Run(ctx, rt, "three", &agent.RunOptions{SessionID: "s4"})
		if err != nil || out.Output != "counted" || seen.Runs != 2 || strings.Join(seen.Prompts, ",") != "one,two" {
			t.Errorf("the next run: %+v, %v; the step saw %+v", out, err, seen)
		}
		if st, err := counter.State(ctx, rt, "s4"); err != nil || st.Runs != 3 || strings.Join(st.Prompts, ",") != "one,two,three" {
			t.Errorf("the state after the next run: %+v, %v", st, err)
		}
		listed(t, s, "run-custom-1=complete", "run-custom-2=complete")
	})
}

// compactJSON returns data compacted: the fixtures hold their records'
// JSON indented.
func compactJSON(t *testing.T, data []byte) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, data); err != nil {
		t.Fatalf("%s: %v", data, err)
	}
	return b.String()
}
