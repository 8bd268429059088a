package main

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/adapters"
	"github.com/calf-go/calf/conversation"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
)

// calf run --agents FILE --agent NAME runs that prototype: its system
// prompt, its model and its tools reach the model.
func TestRunAgents(t *testing.T) {
	for _, tc := range []struct {
		name       string
		args       []string
		wantSystem string
		wantModel  string
		wantStdout string
		wantTools  []string
	}{
		{
			name: "named", args: []string{"--agent", "poet", "--root", "NOTES", "what does the note say?"},
			wantSystem: "Answer in verse.", wantModel: "poet-model", wantTools: []string{"read_file"},
			wantStdout: "Let me read it.\nThe note says: hello from the note\n",
		},
		{
			// The first llm prototype; outside a conversation it has no
			// start_conversation or send tools.
			name: "first", args: []string{"hello"},
			wantSystem: "You talk with the user.", wantModel: "conv-model", wantStdout: "You said: hello\n",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			isolate(t)
			srv, fake := newFakeServer(t)
			notes := writeNote(t)
			args := []string{"run", "--store", "memory:", "--agents", agentsFile(t, srv.URL()), "-q"}
			for _, a := range tc.args {
				args = append(args, strings.ReplaceAll(a, "NOTES", notes))
			}
			got := mustRun(t, exitOK, args...)
			if !strings.HasSuffix(got.stdout, strings.TrimPrefix(tc.wantStdout, "Let me read it.\n")) {
				t.Errorf("stdout %q, want %q", got.stdout, tc.wantStdout)
			}
			reqs := fake.requests()
			if len(reqs) == 0 {
				t.Fatal("no request reached the model")
			}
			for i, r := range reqs {
				if r.Messages[0].Role != model.RoleSystem || r.Messages[0].Text() != tc.wantSystem {
					t.Errorf("request %d: first message %s %q, want the system prompt %q", i, r.Messages[0].Role, r.Messages[0].Text(), tc.wantSystem)
				}
				var tools []string
				for _, d := range r.Tools {
					tools = append(tools, d.Name)
				}
				if strings.Join(tools, ",") != strings.Join(tc.wantTools, ",") {
					t.Errorf("request %d offers tools %q, want %q", i, tools, tc.wantTools)
				}
			}
			for i, m := range fake.requestedModels() {
				if m != tc.wantModel {
					t.Errorf("request %d asked for model %q, want %q", i, m, tc.wantModel)
				}
			}
		})
	}
}

func TestAgentsUsageErrors(t *testing.T) {
	isolate(t)
	t.Setenv(envAPIKey, "sk-test")
	file := agentsFile(t, "http://127.0.0.1:1/v1")
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	writeFile(t, bad, "prototypes:\n  - name: a\n    kind: robot\n  - name: b\n    subagents: [c]\n")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown prototype", []string{"run", "--agents", file, "--agent", "nobody", "hi"}, `--agent "nobody": the --agents file has no llm prototype of that name (it has conversational-agent, poet)`},
		{"code prototype", []string{"run", "--agents", file, "--agent", "docmem-agent", "hi"}, `--agent "docmem-agent"`},
		{"system with agents", []string{"run", "--agents", file, "--system", "x", "hi"}, "--system configures the built-in assistant"},
		{"root without agents", []string{"run", "--root", ".", "hi"}, "give it with --agents FILE"},
		{"agent without agents", []string{"chat", "--agent", "poet"}, "give it with --agents FILE"},
		{"file tools without root", []string{"run", "--agents", file, "--agent", "poet", "hi"}, "prototype poet has the tool read_file: give the directory it works in with --root DIR"},
		{"file with problems", []string{"run", "--agents", bad, "hi"}, bad + ":3: prototype a: kind:"},
		{"every problem", []string{"serve", "--agents", bad}, bad + ":5: prototype b: subagents:"},
		{"missing file", []string{"mcp", "serve", "--agents", filepath.Join(t.TempDir(), "none.yaml")}, "--agents: conversation: open"},
		{"worker with an unknown agent", []string{"worker", "--broker", "nats://127.0.0.1:4222", "--agents", file, "--root", ".", "--agent", "assistant"},
			`--agent "assistant": unknown agent; known: conversational-agent, poet`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := mustRun(t, exitUsage, tc.args...)
			if !strings.Contains(got.stderr, tc.want) {
				t.Errorf("stderr %q, want it to contain %q", got.stderr, tc.want)
			}
		})
	}
}

// calf worker --agents serves the file's conversations: a message on the
// user's channel of a conversation that calf conversations create made is
// answered by the entry prototype's agent.
func TestWorkerServesConversations(t *testing.T) {
	isolate(t)
	brokerURL := natsBrokerURL(t)
	storeURL := "sqlite:" + filepath.Join(t.TempDir(), "calf.db")
	var mu sync.Mutex
	var systems []string
	srv := modeltest.NewServer(func(_ context.Context, req *model.Request) (*model.Response, error) {
		mu.Lock()
		systems = append(systems, req.Messages[0].Text())
		mu.Unlock()
		return modeltest.Text("answer to: " + req.Messages[len(req.Messages)-1].Text()), nil
	})
	t.Cleanup(srv.Close)
	file := agentsFile(t, srv.URL())

	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	code, log := startWorker(t, ctx, "--broker", brokerURL, "--store", storeURL, "--agents", file, "--root", t.TempDir())

	// The worker registered the file's prototypes.
	got := mustRun(t, exitOK, "prototypes", "list", "--store", storeURL)
	if !strings.Contains(got.stdout, "conversational-agent") || !strings.Contains(got.stdout, "poet") {
		t.Fatalf("prototypes after the worker started:\n%s", got.stdout)
	}
	got = mustRun(t, exitOK, "conversations", "create", "--store", storeURL, "--user", "u1", "--json")
	c := decodeConversation(t, got.stdout)

	b, err := adapters.OpenBroker(t.Context(), brokerURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	client := calf.NewClient(b, nil)
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = client.Shutdown(sctx)
	}()
	answers := make(chan conversation.ConversationMessage, 4)
	back, _ := conversation.Channel(c.ID, c.Entry, conversation.UserParticipant)
	if err := client.Handle(t.Context(), back, func(_ context.Context, msg *calf.Message) error {
		m, err := conversation.DecodeMessage(msg.Data)
		if err != nil {
			return calf.Permanent(err)
		}
		answers <- m
		return nil
	}, &calf.SubscribeOptions{Group: "user-side"}); err != nil {
		t.Fatal(err)
	}
	in, _ := conversation.Channel(c.ID, conversation.UserParticipant, c.Entry)
	msg := conversation.ConversationMessage{ConversationID: c.ID, UserID: "u1", Message: "hello there", Timestamp: time.Now().UTC()}
	if _, err := client.Emit(t.Context(), in, msg, calf.WithKey(c.ID)); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-answers:
		if m.AgentID != c.Entry || m.Message != "answer to: hello there" {
			t.Errorf("answer %+v", m)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("no answer on %s; worker log:\n%s", back, log.String())
	}
	mu.Lock()
	if len(systems) == 0 || !strings.HasPrefix(systems[0], "You talk with the user.\n\nAgents you may start") {
		t.Errorf("system prompts %q", systems)
	}
	mu.Unlock()

	// Stopped through the broker: the records, and the runs in progress.
	got = mustRun(t, exitOK, "conversations", "stop", "--store", storeURL, "--broker", brokerURL, "--json", c.ID)
	if s := decodeConversation(t, got.stdout); s.Status != conversation.StatusStopped {
		t.Errorf("stopped conversation %+v", s)
	}
	stop()
	if got := waitExit(t, code, log); got != exitOK {
		t.Errorf("worker exited %d", got)
	}
}
