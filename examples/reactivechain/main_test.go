package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/reactive"
)

func choice(action, payload string) *model.Response {
	raw, _ := json.Marshal(reactive.Choice{Action: action, Payload: payload})
	return modeltest.Text(string(raw))
}

// The chain with scripted models: the summarizer's summary reaches the
// translator through the state.
func TestChain(t *testing.T) {
	summarizer := modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
		doc := req.Messages[len(req.Messages)-1].Text()
		if !strings.Contains(doc, "Cats sleep sixteen hours a day.") {
			t.Errorf("the summarizer saw %q", doc)
		}
		return choice("set_summary", "Cats sleep a lot."), nil
	})
	translator := modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
		prompt := req.Messages[len(req.Messages)-1].Text()
		if !strings.Contains(prompt, "into French") || !strings.Contains(prompt, "Cats sleep a lot.") {
			t.Errorf("the translator saw %q", prompt)
		}
		return choice("set_translation", "Les chats dorment beaucoup."), nil
	})
	s, err := run(t.Context(), summarizer, translator, "French", "Cats sleep sixteen hours a day.")
	if err != nil {
		t.Fatal(err)
	}
	if s.Summary != "Cats sleep a lot." || s.Translation != "Les chats dorment beaucoup." {
		t.Errorf("state %+v", s)
	}
}
