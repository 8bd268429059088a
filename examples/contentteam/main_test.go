package main

import (
	"context"
	"strings"
	"testing"

	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
)

func TestContentTeam(t *testing.T) {
	// One scripted model for the three agents: it answers according to the
	// system prompt, and shows what it was given.
	m := modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
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
	})
	var log strings.Builder
	article, err := run(t.Context(), m, "why cats purr", &log)
	if err != nil {
		t.Fatal(err)
	}
	if want := "Title\nedited article from facts about why cats purr"; article != want {
		t.Errorf("article = %q, want %q", article, want)
	}
	steps := strings.Split(strings.TrimSpace(log.String()), "\n")
	if len(steps) != 3 || !strings.HasPrefix(steps[0], "[step 1] researcher done") || !strings.HasPrefix(steps[1], "[step 2] writer done") || !strings.HasPrefix(steps[2], "[step 3] editor done") {
		t.Errorf("log = %q", log.String())
	}
}
