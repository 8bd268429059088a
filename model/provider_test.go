package model_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/calf-go/calf/model"
)

func TestForProvider(t *testing.T) {
	msgs := []model.Message{
		model.UserMessage("hi"),
		{Role: model.RoleAssistant, Parts: []model.Part{
			{Type: model.PartThinking, Text: "let me think", Signature: "sig-a", Provider: "anthropic"},
			{Type: model.PartThinking, Opaque: "redacted", Provider: "anthropic"},
			model.TextPart("calling"),
		}, ToolCalls: []model.ToolCall{{ID: "c1", Name: "add", Arguments: `{}`}}},
		{Role: model.RoleTool, ToolCallID: "c1", Parts: []model.Part{model.TextPart("5")}},
		{Role: model.RoleAssistant, Parts: []model.Part{{Type: model.PartText, Text: "5", Signature: "g-sig", Provider: "gemini"}},
			ToolCalls: []model.ToolCall{{ID: "c2", Name: "add", Arguments: `{}`, Signature: "g-call", Provider: "gemini"}}},
		{Role: model.RoleAssistant, Parts: []model.Part{{Type: model.PartThinking, Text: "only thought", Provider: "gemini"}}},
	}
	got := model.ForProvider(msgs, "anthropic")
	want := []model.Message{
		msgs[0], msgs[1], msgs[2],
		{Role: model.RoleAssistant, Parts: []model.Part{model.TextPart("5")}, ToolCalls: []model.ToolCall{{ID: "c2", Name: "add", Arguments: `{}`}}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("for anthropic (-want +got):\n%s", diff)
	}
	got = model.ForProvider(msgs, "openai")
	want = []model.Message{
		msgs[0],
		{Role: model.RoleAssistant, Parts: []model.Part{model.TextPart("calling")}, ToolCalls: msgs[1].ToolCalls},
		msgs[2],
		{Role: model.RoleAssistant, Parts: []model.Part{model.TextPart("5")}, ToolCalls: []model.ToolCall{{ID: "c2", Name: "add", Arguments: `{}`}}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("for openai (-want +got):\n%s", diff)
	}
	if msgs[1].Parts[0].Signature != "sig-a" || msgs[3].ToolCalls[0].Signature != "g-call" {
		t.Error("ForProvider changed its input")
	}
	plain := []model.Message{model.UserMessage("a"), model.AssistantMessage("b")}
	if got := model.ForProvider(plain, "gemini"); &got[0] != &plain[0] {
		t.Error("ForProvider copied a conversation it had nothing to drop from")
	}
}

func TestStatusErrorKinds(t *testing.T) {
	kinds := []error{model.ErrRateLimited, model.ErrOverloaded, model.ErrContextTooLong, model.ErrAuthentication, model.ErrInvalidRequest}
	for _, tc := range []struct {
		err  *model.StatusError
		want []error
	}{
		{&model.StatusError{Provider: "openai", StatusCode: 429, Message: "slow down"}, []error{model.ErrRateLimited}},
		{&model.StatusError{Provider: "anthropic", StatusCode: 529, Type: "overloaded_error"}, []error{model.ErrOverloaded}},
		{&model.StatusError{Provider: "gemini", StatusCode: 503, Type: "UNAVAILABLE"}, []error{model.ErrOverloaded}},
		{&model.StatusError{Provider: "openai", StatusCode: 400, Type: "invalid_request_error", Code: "context_length_exceeded"}, []error{model.ErrContextTooLong, model.ErrInvalidRequest}},
		{&model.StatusError{Provider: "anthropic", StatusCode: 400, Type: "invalid_request_error", Message: "prompt is too long: 210000 tokens > 200000 maximum"}, []error{model.ErrContextTooLong, model.ErrInvalidRequest}},
		{&model.StatusError{Provider: "gemini", StatusCode: 400, Type: "INVALID_ARGUMENT", Message: "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576)."}, []error{model.ErrContextTooLong, model.ErrInvalidRequest}},
		{&model.StatusError{Provider: "anthropic", StatusCode: 401, Type: "authentication_error"}, []error{model.ErrAuthentication}},
		{&model.StatusError{Provider: "openai", StatusCode: 500}, nil},
	} {
		var got []error
		for _, k := range kinds {
			if errors.Is(tc.err, k) {
				got = append(got, k)
			}
		}
		if len(got) != len(tc.want) {
			t.Errorf("%v matches %v; want %v", tc.err, got, tc.want)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("%v matches %v; want %v", tc.err, got, tc.want)
			}
		}
	}
	e := &model.StatusError{Provider: "anthropic", StatusCode: 529, Type: "overloaded_error", Message: "Overloaded", RequestID: "req_1"}
	if want := "model: anthropic returned HTTP 529 overloaded_error: Overloaded (request req_1)"; e.Error() != want {
		t.Errorf("Error() = %q, want %q", e.Error(), want)
	}
}
