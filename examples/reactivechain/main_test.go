package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/calf-go/calf/examples/internal/extest"
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

// TestChainOnCassette runs the example through model/openai, replaying
// testdata/chain.httprr: the summarizer, then the translator triggered by
// the summary, on one model as in the example's main. The committed
// cassette was recorded against a local OpenAI-compatible server
// (model/modeltest's) answering with the script below; to record it
// against a real provider instead:
//
//	CALF_RECORD=1 OPENAI_API_KEY=... go test -run '^TestChainOnCassette$' ./examples/reactivechain
func TestChainOnCassette(t *testing.T) {
	m := extest.Model(t, "testdata/chain.httprr", modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
		prompt := req.Messages[len(req.Messages)-1].Text()
		switch {
		case strings.Contains(prompt, "set_summary"):
			return choice("set_summary", "Cats sleep most of the day."), nil
		case strings.Contains(prompt, "set_translation"):
			return choice("set_translation", "Les chats dorment la plupart de la journée."), nil
		}
		t.Errorf("unexpected prompt %q", prompt)
		return modeltest.Text("?"), nil
	}).Generate)
	s, err := run(t.Context(), m, m, "French", "Cats sleep sixteen hours a day. They hunt at dawn and dusk.")
	if err != nil {
		t.Fatal(err)
	}
	if s.Summary == "" || s.Translation == "" || s.Translation == s.Summary {
		t.Errorf("state %+v; want a summary and its translation", s)
	}
}
