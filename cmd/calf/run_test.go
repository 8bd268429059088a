package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
)

// noteText is the content of the file the fake model asks to read.
const noteText = "hello from the note\nsecond line\nthird line\n"

// writeNote writes note.txt in a new directory and returns the directory.
func writeNote(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "note.txt"), []byte(noteText), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// turn is a message of a request, reduced to what the tests compare.
type turn struct {
	Role model.Role
	Text string
	// Calls are the names of the tools an assistant message calls.
	Calls []string
}

func turns(msgs []model.Message) []turn {
	var out []turn
	for _, m := range msgs {
		tr := turn{Role: m.Role, Text: m.Text()}
		for _, c := range m.ToolCalls {
			tr.Calls = append(tr.Calls, c.Name)
		}
		out = append(out, tr)
	}
	return out
}

func TestRun(t *testing.T) {
	noteDir := writeNote(t)
	numbered := "     1\thello from the note\n     2\tsecond line\n     3\tthird line\n"
	for _, tc := range []struct {
		name string
		args []string
		// viaEnv gives the server in OPENAI_BASE_URL instead of --model.
		viaEnv     bool
		stdin      string
		wantStdout string
		wantStderr string
		// wantTurns are the messages of each request the server saw.
		wantTurns [][]turn
		wantTools bool // whether the requests offered tools
	}{
		{
			name:       "answer",
			args:       []string{"hello", "there"},
			wantStdout: "You said: hello there\n",
			wantTurns:  [][]turn{{{Role: model.RoleSystem, Text: defaultInstructions}, {Role: model.RoleUser, Text: "hello there"}}},
		},
		{
			name:       "OPENAI_BASE_URL and a system prompt",
			args:       []string{"--model", "test-model", "--system", "Be brief.", "hi"},
			viaEnv:     true,
			wantStdout: "You said: hi\n",
			wantTurns:  [][]turn{{{Role: model.RoleSystem, Text: "Be brief."}, {Role: model.RoleUser, Text: "hi"}}},
		},
		{
			name:       "prompt from standard input",
			args:       []string{"-"},
			stdin:      "a question\nover two lines",
			wantStdout: "You said: a question\nover two lines\n",
			wantTurns:  [][]turn{{{Role: model.RoleSystem, Text: defaultInstructions}, {Role: model.RoleUser, Text: "a question\nover two lines"}}},
		},
		{
			name:       "tool call",
			args:       []string{"--read", noteDir, "what does the note say?"},
			wantStdout: "Let me read it.\nThe note says: hello from the note\n",
			wantStderr: "→ read_file {\"path\":\"note.txt\"}\n← 3 lines\n",
			wantTools:  true,
			wantTurns: [][]turn{
				{{Role: model.RoleSystem, Text: defaultInstructions}, {Role: model.RoleUser, Text: "what does the note say?"}},
				{
					{Role: model.RoleSystem, Text: defaultInstructions},
					{Role: model.RoleUser, Text: "what does the note say?"},
					{Role: model.RoleAssistant, Text: "Let me read it.", Calls: []string{"read_file"}},
					{Role: model.RoleTool, Text: numbered},
				},
			},
		},
		{
			name:       "quiet",
			args:       []string{"--quiet", "--read", noteDir, "what does the note say?"},
			wantStdout: "The note says: hello from the note\n",
			wantTools:  true,
			wantTurns: [][]turn{
				{{Role: model.RoleSystem, Text: defaultInstructions}, {Role: model.RoleUser, Text: "what does the note say?"}},
				{
					{Role: model.RoleSystem, Text: defaultInstructions},
					{Role: model.RoleUser, Text: "what does the note say?"},
					{Role: model.RoleAssistant, Text: "Let me read it.", Calls: []string{"read_file"}},
					{Role: model.RoleTool, Text: numbered},
				},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			isolate(t)
			srv, fake := newFakeServer(t)
			args := append([]string{"run", "--store", "memory:"}, tc.args...)
			if tc.viaEnv {
				t.Setenv(envBaseURL, srv.URL())
			} else {
				args = append(args[:3:3], append([]string{"--model", srv.URL() + "#test-model"}, tc.args...)...)
			}
			got := runMain(t.Context(), tc.stdin, args...)
			want := result{code: exitOK, stdout: tc.wantStdout, stderr: tc.wantStderr}
			if diff := cmp.Diff(want, got, cmp.AllowUnexported(result{})); diff != "" {
				t.Errorf("Main(%q) (-want +got):\n%s", args, diff)
			}
			reqs := fake.requests()
			var gotTurns [][]turn
			for _, r := range reqs {
				gotTurns = append(gotTurns, turns(r.Messages))
				if hasTools := len(r.Tools) > 0; hasTools != tc.wantTools {
					t.Errorf("request offers tools: %t, want %t", hasTools, tc.wantTools)
				}
			}
			if diff := cmp.Diff(tc.wantTurns, gotTurns); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
			for i, m := range fake.requestedModels() {
				if m != "test-model" {
					t.Errorf("request %d asked for model %q, want test-model", i, m)
				}
			}
		})
	}
}

func TestRunReadTools(t *testing.T) {
	isolate(t)
	srv, fake := newFakeServer(t)
	got := runMain(t.Context(), "", "run", "--store", "memory:", "--model", srv.URL()+"#m", "--read", writeNote(t), "what is here?")
	if got.code != exitOK {
		t.Fatalf("calf run = %d, stderr %q", got.code, got.stderr)
	}
	var names []string
	for _, d := range fake.requests()[0].Tools {
		names = append(names, d.Name)
	}
	slices.Sort(names)
	if diff := cmp.Diff([]string{"glob", "grep", "list_dir", "read_file"}, names); diff != "" {
		t.Errorf("tools offered (-want +got):\n%s", diff)
	}
}

func TestRunJSON(t *testing.T) {
	isolate(t)
	srv, _ := newFakeServer(t)
	got := runMain(t.Context(), "", "run", "--store", "memory:", "--model", srv.URL()+"#m", "--json", "--read", writeNote(t), "what does the note say?")
	if got.code != exitOK || got.stderr != "" {
		t.Fatalf("calf run --json = %d, stderr %q", got.code, got.stderr)
	}
	lines := strings.Split(strings.TrimSuffix(got.stdout, "\n"), "\n")
	// The text deltas and the output travel in order, under the run's key;
	// the broker does not order the other events with them, so only their
	// counts are bounded: each appears at most once per step.
	count := map[agent.EventKind]int{}
	var text strings.Builder
	var last jsonEvent
	for i, line := range lines {
		var ev jsonEvent
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("line %d is not JSON: %v\n%s", i+1, err, line)
		}
		if ev.Agent != agentName || ev.RunID == "" || ev.ID == "" || ev.Channel == "" || ev.Time == nil || len(ev.Data) == 0 {
			t.Errorf("line %d lacks a field: %s", i+1, line)
		}
		if ev.Kind == agent.EventDelta {
			var p agent.StreamEvent
			if err := json.Unmarshal(ev.Data, &p); err != nil {
				t.Fatalf("line %d: %v", i+1, err)
			}
			text.WriteString(p.Delta.Text)
		}
		count[ev.Kind]++
		last = ev
	}
	if last.Kind != agent.EventOutput || count[agent.EventOutput] != 1 {
		t.Errorf("the last event is %s, and there are %d outputs; want one output, last", last.Kind, count[agent.EventOutput])
	}
	if count[agent.EventDelta] < 2 {
		t.Errorf("%d delta events, want the text in several", count[agent.EventDelta])
	}
	for kind, most := range map[agent.EventKind]int{agent.EventInput: 1, agent.EventInference: 2, agent.EventToolCall: 1, agent.EventToolResult: 1} {
		if count[kind] > most {
			t.Errorf("%d %s events, want at most %d", count[kind], kind, most)
		}
	}
	if want := "Let me read it.The note says: hello from the note"; text.String() != want {
		t.Errorf("streamed text %q, want %q", text.String(), want)
	}
	var out agent.OutputEvent
	if err := json.Unmarshal(last.Data, &out); err != nil {
		t.Fatal(err)
	}
	// The test server's model, m, is not in the price table: its calls are
	// reported unpriced.
	if diff := cmp.Diff(agent.OutputEvent{Status: agent.OutputComplete, Content: json.RawMessage(`"The note says: hello from the note"`), Steps: 2, Deltas: 7,
		Cost: model.Cost{Unpriced: []string{"m"}}},
		out, cmp.FilterPath(func(p cmp.Path) bool { s := p.String(); return s == "Usage" || s == "RunID" || s == "Agent" }, cmp.Ignore())); diff != "" {
		t.Errorf("output event (-want +got):\n%s", diff)
	}
}

func TestRunSession(t *testing.T) {
	isolate(t)
	srv, fake := newFakeServer(t)
	db := "sqlite:" + filepath.Join(t.TempDir(), "calf.db")
	run := func(args ...string) {
		t.Helper()
		args = append([]string{"run", "--store", db, "--model", srv.URL() + "#m"}, args...)
		if got := runMain(t.Context(), "", args...); got.code != exitOK {
			t.Fatalf("Main(%q) = %d, stderr %q", args, got.code, got.stderr)
		}
	}
	run("--session", "trip", "My name is Ada.")
	run("--session", "trip", "What is my name?")
	run("--session", "other", "Who am I?")
	run("Hello?")

	sys := turn{Role: model.RoleSystem, Text: defaultInstructions}
	want := [][]turn{
		{sys, {Role: model.RoleUser, Text: "My name is Ada."}},
		{
			sys,
			{Role: model.RoleUser, Text: "My name is Ada."},
			{Role: model.RoleAssistant, Text: "You said: My name is Ada."},
			{Role: model.RoleUser, Text: "What is my name?"},
		},
		{sys, {Role: model.RoleUser, Text: "Who am I?"}},
		{sys, {Role: model.RoleUser, Text: "Hello?"}},
	}
	var got [][]turn
	for _, r := range fake.requests() {
		got = append(got, turns(r.Messages))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}

func TestRunDefaultStore(t *testing.T) {
	isolate(t)
	srv, _ := newFakeServer(t)
	if got := runMain(t.Context(), "", "run", "--model", srv.URL()+"#m", "hi"); got.code != exitOK {
		t.Fatalf("calf run = %d, stderr %q", got.code, got.stderr)
	}
	path := filepath.Join(os.Getenv("XDG_DATA_HOME"), "calf", "calf.db")
	if _, err := os.Stat(path); err != nil {
		t.Errorf("the default store: %v", err)
	}
}

func TestRunFailure(t *testing.T) {
	isolate(t)
	srv, fake := newFakeServer(t)
	srv.FailNext(1, http.StatusBadRequest)
	got := runMain(t.Context(), "", "run", "--store", "memory:", "--model", srv.URL()+"#m", "hi")
	if got.code != exitFailure || got.stdout != "" || !strings.HasPrefix(got.stderr, "calf: ") || !strings.Contains(got.stderr, "400") {
		t.Errorf("calf run against a failing server = %d, stdout %q, stderr %q; want %d and calf: ... 400 on stderr",
			got.code, got.stdout, got.stderr, exitFailure)
	}
	if n := len(fake.requests()); n != 0 {
		t.Errorf("the handler saw %d requests, want 0", n)
	}
}

func TestRunDiscoversModel(t *testing.T) {
	isolate(t)
	fake := &fakeModel{}
	srv := modeltest.NewServerWithOptions(fake.handle, &modeltest.ServerOptions{Models: []string{"llama3.2", "other"}})
	defer srv.Close()
	if got := runMain(t.Context(), "", "run", "--store", "memory:", "--model", srv.URL(), "hi"); got.code != exitOK {
		t.Fatalf("calf run = %d, stderr %q", got.code, got.stderr)
	}
	if diff := cmp.Diff([]string{"llama3.2"}, fake.requestedModels()); diff != "" {
		t.Errorf("requested models (-want +got):\n%s", diff)
	}
}

func TestRunInterrupted(t *testing.T) {
	isolate(t)
	started := make(chan struct{})
	srv := modeltest.NewServer(func(ctx context.Context, _ *model.Request) (*model.Response, error) {
		close(started)
		<-ctx.Done() // a model that never answers
		return nil, ctx.Err()
	})
	defer srv.Close()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() {
		<-started
		cancel() // as Ctrl-C does
	}()
	// The run's own timeout is long: only the cancellation can end it with 130.
	got := runMain(ctx, "", "run", "--store", "memory:", "--model", srv.URL()+"#m", "--timeout", "1h", "hi")
	want := result{code: exitInterrupted, stderr: "calf: interrupted\n"}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(result{})); diff != "" {
		t.Errorf("interrupted run (-want +got):\n%s", diff)
	}
}

func TestRunTimeout(t *testing.T) {
	isolate(t)
	srv := modeltest.NewServer(func(ctx context.Context, _ *model.Request) (*model.Response, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	defer srv.Close()
	got := runMain(t.Context(), "", "run", "--store", "memory:", "--model", srv.URL()+"#m", "--timeout", "50ms", "hi")
	if got.code != exitFailure || !strings.Contains(got.stderr, "timed out after 50ms") {
		t.Errorf("calf run --timeout 50ms = %d, stderr %q; want %d and a timeout", got.code, got.stderr, exitFailure)
	}
}

// calf run refuses a prompt over the broker's size limit in the user's
// terms: the limit, and what to do.
func TestRunPromptTooLarge(t *testing.T) {
	isolate(t)
	srv, _ := newFakeServer(t)
	got := runMain(t.Context(), strings.Repeat("a", 10<<20), "run", "--store", "memory:", "--model", srv.URL()+"#m", "-")
	if got.code != exitUsage || !strings.Contains(got.stderr, "the prompt is too large") || !strings.Contains(got.stderr, "limit of 1048576 bytes") || !strings.Contains(got.stderr, "--read DIR") {
		t.Errorf("exit %d, %s", got.code, got.stderr[:min(len(got.stderr), 500)])
	}
}
