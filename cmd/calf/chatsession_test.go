package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/calf-go/calf/agent/session"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/store/memory"
)

// /fork in calf chat names the copy after the session, and /resume prints
// the conversation's last messages, not only counts.
func TestChatForkAndResume(t *testing.T) {
	ctx := t.Context()
	st := memory.New()
	msgs := []model.Message{}
	for i := range 8 {
		msgs = append(msgs, model.Message{Role: model.RoleUser, Parts: []model.Part{model.TextPart(fmt.Sprintf("question %d", i))}},
			model.Message{Role: model.RoleAssistant, Parts: []model.Part{model.TextPart(fmt.Sprintf("answer %d", i))}})
	}
	msgs = append(msgs, model.Message{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "c1", Name: "read_file", Arguments: `{"path": "a.txt"}`}}},
		model.Message{Role: model.RoleTool, ToolCallID: "c1", Parts: []model.Part{model.TextPart("the file's content")}},
		model.Message{Role: model.RoleAssistant, Parts: []model.Part{model.TextPart("the last answer")}})
	if err := session.Save(ctx, st, &session.Session{ID: "chat-0123456789", Title: "Trip to Lyon", Messages: msgs}); err != nil {
		t.Fatal(err)
	}

	for i, want := range []struct{ id, title string }{
		{"chat-0123456789-fork", "Trip to Lyon (fork)"},
		{"chat-0123456789-fork-2", "Trip to Lyon (fork)"},
	} {
		s, err := forkSession(ctx, st, "chat-0123456789")
		if err != nil || s.ID != want.id || s.Title != want.title {
			t.Fatalf("fork %d: %+v, %v; want %s %q", i+1, s, err, want.id, want.title)
		}
	}
	// A fork of a fork is named after the first session.
	if s, err := forkSession(ctx, st, "chat-0123456789-fork"); err != nil || s.ID != "chat-0123456789-fork-3" || s.Title != "Trip to Lyon (fork)" {
		t.Errorf("fork of a fork: %+v, %v", s, err)
	}

	text, err := resumeText(ctx, st, "chat-0123456789")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"earlier messages", "question 7", "answer 7", "read_file", "the last answer", `resumed session chat-0123456789: 19 messages, "Trip to Lyon"`} {
		if !strings.Contains(text, want) {
			t.Errorf("/resume does not show %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "question 0") || strings.Contains(text, "the file's content") {
		t.Errorf("/resume shows more than the last messages:\n%s", text)
	}
	if strings.Index(text, "question 7") > strings.Index(text, "the last answer") {
		t.Errorf("/resume shows the messages out of order:\n%s", text)
	}
	if _, err := resumeText(ctx, st, "nope"); err == nil {
		t.Error("/resume of no session: no error")
	}
}
