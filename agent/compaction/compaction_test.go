package compaction_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/calf-go/calf/agent/compaction"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
)

// conversation is a user question, a tool call and its result, and the
// assistant's answer.
func conversation() []model.Message {
	return []model.Message{
		model.UserMessage("what is in notes.txt?"),
		{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "c1", Name: "read_file", Arguments: `{"path":"notes.txt"}`}}},
		{Role: model.RoleTool, ToolCallID: "c1", ToolName: "read_file", Parts: []model.Part{model.TextPart(strings.Repeat("the notes ", 100))}},
		model.AssistantMessage("The notes repeat themselves."),
	}
}

func TestEstimateTokens(t *testing.T) {
	for _, tt := range []struct {
		name string
		m    model.Message
		want int
	}{
		{"empty", model.Message{Role: model.RoleUser}, 4},
		{"text", model.UserMessage(strings.Repeat("a", 400)), 104},
		{"image", model.Message{Role: model.RoleUser, Parts: []model.Part{model.ImageURLPart("https://example.com/a.png")}}, 1004},
		{"tool call", model.Message{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "1234", Name: "read", Arguments: "{}"}}}, 4 + 4 + 3},
	} {
		if got := compaction.EstimateTokens(tt.m); got != tt.want {
			t.Errorf("%s: %d tokens, want %d", tt.name, got, tt.want)
		}
	}
}

// DropToolResults keeps every message and call, and replaces only the
// content of tool results; the input is left as it was.
func TestDropToolResults(t *testing.T) {
	in := conversation()
	res, err := compaction.DropToolResults().Compact(t.Context(), &compaction.Input{Messages: in})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Messages) != len(in) || res.Usage.Requests != 0 {
		t.Fatalf("result %+v", res)
	}
	for i, m := range res.Messages {
		if m.Role != in[i].Role || len(m.ToolCalls) != len(in[i].ToolCalls) || m.ToolCallID != in[i].ToolCallID {
			t.Errorf("message %d changed: %+v", i, m)
		}
		if m.Role == model.RoleTool {
			if got := m.Text(); got != "[this tool result was removed to save context]" {
				t.Errorf("tool result %q", got)
			}
		} else if m.Text() != in[i].Text() {
			t.Errorf("message %d: %q, want %q", i, m.Text(), in[i].Text())
		}
	}
	if !strings.HasPrefix(in[2].Text(), "the notes") {
		t.Errorf("the input was changed: %q", in[2].Text())
	}
}

// Summarize sends the transcript with the instructions (the default when
// none are given) and a target size, and returns the summary as one user
// message with the summary's usage and model.
func TestSummarize(t *testing.T) {
	var got *model.Request
	m := modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
		got = req
		return &model.Response{Message: model.AssistantMessage("  The user asked about notes.txt.  "), Usage: model.Usage{InputTokens: 300, OutputTokens: 9}}, nil
	})
	res, err := compaction.Summarize(m, "").Compact(t.Context(), &compaction.Input{Messages: conversation(), Target: 400})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Messages) != 2 || got.Messages[0].Text() != compaction.DefaultSummaryInstructions {
		t.Fatalf("request %+v", got.Messages)
	}
	prompt := got.Messages[1].Text()
	for _, want := range []string{"at most 300 tokens", "[user] what is in notes.txt?", `called read_file({"path":"notes.txt"})`, "[tool result of read_file] the notes", "[assistant] The notes repeat"} {
		if !strings.Contains(prompt, want) {
			t.Errorf("the prompt lacks %q:\n%s", want, prompt)
		}
	}
	if len(res.Messages) != 1 || res.Messages[0].Role != model.RoleUser ||
		res.Messages[0].Text() != "[A summary of the earlier conversation]\nThe user asked about notes.txt." {
		t.Errorf("messages %+v", res.Messages)
	}
	if res.Usage.Requests != 1 || res.Usage.InputTokens != 300 || res.Model != "function" {
		t.Errorf("usage %+v, model %q", res.Usage, res.Model)
	}

	if _, err := compaction.Summarize(m, "Be brief.").Compact(t.Context(), &compaction.Input{Messages: conversation()}); err != nil || got.Messages[0].Text() != "Be brief." {
		t.Errorf("own instructions: %v, %q", err, got.Messages[0].Text())
	}
}

// A summarizer that fails or answers nothing fails the compaction.
func TestSummarizeFails(t *testing.T) {
	boom := errors.New("boom")
	for _, tt := range []struct {
		name string
		resp *model.Response
		err  error
	}{
		{"error", nil, boom},
		{"no text", &model.Response{Message: model.AssistantMessage("  ")}, nil},
	} {
		m := modeltest.FunctionModel(func(context.Context, *model.Request) (*model.Response, error) { return tt.resp, tt.err })
		res, err := compaction.Summarize(m, "").Compact(t.Context(), &compaction.Input{Messages: conversation()})
		if err == nil || res != nil || (tt.err != nil && !errors.Is(err, boom)) {
			t.Errorf("%s: %+v, %v", tt.name, res, err)
		}
	}
}
