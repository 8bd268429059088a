package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/calf-go/calf/examples/internal/extest"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
)

// TestApprovedInTheSecondRound runs the example through model/openai,
// replaying testdata/approved-in-the-second-round.httprr: a draft, a
// review asking for more, a revision, an approval. The writer and the
// reviewer share the model, as in the example's main. The committed
// cassette was recorded against a local OpenAI-compatible server
// (model/modeltest's) answering with the script below; to record it
// against a real provider instead:
//
//	CALF_RECORD=1 OPENAI_API_KEY=... go test -run '^TestApprovedInTheSecondRound$' ./examples/writereview
func TestApprovedInTheSecondRound(t *testing.T) {
	m := extest.Model(t, "testdata/approved-in-the-second-round.httprr", modeltest.NewTestModel(
		modeltest.Text("Events flow"),
		modeltest.Text("Too short."),
		func(_ context.Context, req *model.Request) (*model.Response, error) {
			// The second draft sees the first and the feedback.
			p := req.Messages[len(req.Messages)-1].Text()
			if !strings.Contains(p, "Previous draft: Events flow") || !strings.Contains(p, "Feedback: Too short.") {
				t.Errorf("second writer prompt = %q", p)
			}
			return modeltest.Text("Events flow / agents wake and react / state waits in the store"), nil
		},
		modeltest.Text("APPROVED. Nice."),
	).Generate)
	var log strings.Builder
	final, err := run(t.Context(), m, m, "a haiku about event-driven agents", 3, &log)
	if err != nil {
		t.Fatal(err)
	}
	if final.Topic != "a haiku about event-driven agents" || final.Draft == "" || final.Rounds < 1 || final.Rounds > 3 ||
		final.Approved != strings.Contains(strings.ToUpper(final.Feedback), "APPROVED") {
		t.Errorf("final = %+v", final)
	}
	// Each round is a draft and a review, the last review ends the cycle.
	var want strings.Builder
	for i := range final.Rounds {
		next := "write"
		if i == final.Rounds-1 {
			next = "end"
		}
		fmt.Fprintf(&want, "step %d: write done, next review\nstep %d: review done, next %s\n", 2*i+1, 2*i+2, next)
	}
	if log.String() != want.String() {
		t.Errorf("log = %q\nwant %q", log.String(), want.String())
	}
}

func TestStopsAfterMaxRounds(t *testing.T) {
	draft := modeltest.FunctionModel(func(context.Context, *model.Request) (*model.Response, error) {
		return modeltest.Text("a draft"), nil
	})
	never := modeltest.FunctionModel(func(context.Context, *model.Request) (*model.Response, error) {
		return modeltest.Text("Not yet."), nil
	})
	var log strings.Builder
	final, err := run(t.Context(), draft, never, "a haiku", 2, &log)
	if err != nil {
		t.Fatal(err)
	}
	if final.Approved || final.Rounds != 2 || final.Feedback != "Not yet." {
		t.Errorf("final = %+v", final)
	}
	if n := strings.Count(log.String(), "write done"); n != 2 {
		t.Errorf("%d drafts, want 2:\n%s", n, log.String())
	}
}
