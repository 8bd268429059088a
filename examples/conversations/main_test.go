package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/calf-go/calf/conversation/docmem"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
)

// script is the conversational agent's model for the tests: each user
// message (by its start) has the tool calls it makes, one per model call,
// then its answer.
var script = []struct {
	prefix string
	calls  []string // tool name, then its arguments as JSON
	answer string
}{
	{"Create a docmem", []string{
		"start_conversation", `{"prototype":"docmem-agent"}`,
		"send", `{"agent":"docmem-agent","command":["docmem-create","project-notes","Project notes"]}`,
		"send", `{"agent":"docmem-agent","command":["docmem-append","project-notes","root","Decisions: keep the user's context apart from the tool traffic."]}`,
	}, "I've created the docmem 'project-notes' with your decision."},
	{"What does it say", []string{
		"send", `{"agent":"docmem-agent","command":["docmem-read","project-notes"]}`,
	}, ""}, // the answer quotes the read
}

// scripted returns the model of the script; its requests are recorded.
func scripted(t *testing.T) (modeltest.FunctionModel, func() [][]model.Message) {
	var mu sync.Mutex
	var requests [][]model.Message
	return func(_ context.Context, req *model.Request) (*model.Response, error) {
			mu.Lock()
			requests = append(requests, model.CloneMessages(req.Messages))
			mu.Unlock()
			user, calls, last := "", 0, ""
			for _, m := range req.Messages {
				switch {
				case m.Role == model.RoleUser:
					user, calls = m.Text(), 0
				case len(m.ToolCalls) > 0:
					calls += len(m.ToolCalls)
				case m.Role == model.RoleTool:
					last = m.Text()
				}
			}
			for _, s := range script {
				if !strings.HasPrefix(user, s.prefix) {
					continue
				}
				if 2*calls < len(s.calls) {
					return modeltest.ToolCalls(modeltest.Call(fmt.Sprint("call_", calls), s.calls[2*calls], s.calls[2*calls+1])), nil
				}
				if s.answer != "" {
					return modeltest.Text(s.answer), nil
				}
				var res docmem.Result
				if err := json.Unmarshal([]byte(last), &res); err != nil || !res.OK {
					return modeltest.Text("I could not read it: " + last), nil
				}
				return modeltest.Text("It says:\n" + res.Text), nil
			}
			t.Errorf("unexpected message %q", user)
			return modeltest.Text("?"), nil
		}, func() [][]model.Message {
			mu.Lock()
			defer mu.Unlock()
			return requests
		}
}

// TestConversation runs the example's system on the embedded default with
// a scripted model: the first message has the conversational agent start
// the docmem agent, create a document and append to it; the second reads
// it back. The second message's model requests hold no tool call of the
// first, and the document is in the store.
func TestConversation(t *testing.T) {
	m, requests := scripted(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cfg := config{Prototypes: defaultPrototypes, Broker: "memory://", Store: "memory:", User: "u1", Tools: true, Timeout: 20 * time.Second}
	s, err := start(ctx, m, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	first, err := s.say(ctx, "Create a docmem called project-notes with my decision")
	if err != nil || first != script[0].answer {
		t.Fatalf("first answer %q, %v", first, err)
	}
	n := len(requests())
	second, err := s.say(ctx, "What does it say?")
	if err != nil || !strings.Contains(second, "# Project notes") || !strings.Contains(second, "Decisions: keep the user's context apart") {
		t.Fatalf("second answer %q, %v", second, err)
	}
	// The document, read from the store.
	res, err := docmem.New(s.st, nil).Apply(ctx, s.conv.ID, docmem.Command{Command: docmem.CmdRead, Doc: "project-notes"})
	if err != nil || !res.OK || !strings.Contains(res.Text, "Decisions") {
		t.Fatalf("read: %+v, %v", res, err)
	}
	// The second message's first request: the first exchange without its
	// tool traffic.
	for _, msg := range requests()[n] {
		if len(msg.ToolCalls) > 0 || msg.Role == model.RoleTool {
			t.Errorf("the second message's first request holds %s %q", msg.Role, msg.Text())
		}
	}
	// The tool context keeps it.
	calls, err := s.host.ToolContext(ctx, s.conv.Entry, 0)
	if err != nil || len(calls) != 4 || calls[0].Tool != "start_conversation" || !strings.Contains(calls[3].Arguments, "docmem-read") {
		t.Fatalf("tool context %+v, %v", calls, err)
	}
}

// TestRun runs the command's loop: messages in, answers and the tool
// context out, on the embedded default and on a durable broker and store
// (an embedded NATS server and SQLite, as NATS and PostgreSQL would be).
func TestRun(t *testing.T) {
	dir := t.TempDir()
	for name, urls := range map[string][2]string{
		"memory":      {"memory://", "memory:"},
		"nats+sqlite": {"nats+embedded://" + filepath.Join(dir, "nats"), "sqlite:" + filepath.Join(dir, "calf.db")},
	} {
		t.Run(name, func(t *testing.T) { testRun(t, urls[0], urls[1]) })
	}
}

func testRun(t *testing.T, brokerURL, storeURL string) {
	m, _ := scripted(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cfg := config{Prototypes: defaultPrototypes, Broker: brokerURL, Store: storeURL, User: "u1", Tools: true, Timeout: 30 * time.Second}
	var out strings.Builder
	id, err := run(ctx, m, cfg, strings.NewReader("Create a docmem called project-notes\n\nWhat does it say?\n"), &out)
	if err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		"> Create a docmem called project-notes\n" + script[0].answer,
		"[send " + `{"agent":"docmem-agent","command":["docmem-create","project-notes","Project notes"]}` + " -> success: ",
		"> What does it say?\nIt says:\n# Project notes",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if id == "" {
		t.Error("no conversation id")
	}
}
