package main

import (
	"context"
	"strings"
	"testing"

	"github.com/calf-go/calf/examples/internal/extest"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
)

// TestContentTeam runs the example through model/openai, replaying
// testdata/contentteam.httprr: the researcher, the writer and the editor in
// turn. The committed cassette was recorded against a local
// OpenAI-compatible server (model/modeltest's) answering with the script
// below; to record it against a real provider instead:
//
//	CALF_RECORD=1 OPENAI_API_KEY=... go test -run '^TestContentTeam$' ./examples/contentteam
func TestContentTeam(t *testing.T) {
	// One script for the three agents: it answers according to the
	// system prompt, and shows what it was given.
	m := extest.Model(t, "testdata/contentteam.httprr", modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
		in := req.Messages[len(req.Messages)-1].Text()
		switch req.Messages[0].Text() {
		case researcherInstructions:
			return modeltest.Text("facts about " + in), nil
		case writerInstructions:
			return modeltest.Text("article from " + in), nil
		case editorInstructions:
			return modeltest.Text("Title\nedited " + in), nil
		}
		t.Errorf("unexpected system prompt %q", req.Messages[0].Text())
		return modeltest.Text("?"), nil
	}).Generate)
	var log strings.Builder
	article, err := run(t.Context(), m, "why cats purr", &log)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.ToLower(article), "purr") {
		t.Errorf("article = %q, want it about purring", article)
	}
	steps := strings.Split(strings.TrimSpace(log.String()), "\n")
	if len(steps) != 3 || !strings.HasPrefix(steps[0], "[step 1] researcher done") || !strings.HasPrefix(steps[1], "[step 2] writer done") || !strings.HasPrefix(steps[2], "[step 3] editor done") {
		t.Errorf("log = %q", log.String())
	}
}
