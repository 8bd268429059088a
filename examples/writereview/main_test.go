package main

import (
	"context"
	"strings"
	"testing"

	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
)

func TestApprovedInTheSecondRound(t *testing.T) {
	writer := modeltest.NewTestModel(
		modeltest.Text("Events flow"),
		func(_ context.Context, req *model.Request) (*model.Response, error) {
			// The second draft sees the first and the feedback.
			p := req.Messages[len(req.Messages)-1].Text()
			if !strings.Contains(p, "Previous draft: Events flow") || !strings.Contains(p, "Feedback: Too short.") {
				t.Errorf("second writer prompt = %q", p)
			}
			return modeltest.Text("Events flow / agents wake and react / state waits in the store"), nil
		},
	)
	reviewer := modeltest.NewTestModel(modeltest.Text("Too short."), modeltest.Text("APPROVED. Nice."))
	var log strings.Builder
	final, err := run(t.Context(), writer, reviewer, "a haiku", 3, &log)
	if err != nil {
		t.Fatal(err)
	}
	want := Review{Topic: "a haiku", Draft: "Events flow / agents wake and react / state waits in the store",
		Feedback: "APPROVED. Nice.", Approved: true, Rounds: 2}
	if final != want {
		t.Errorf("final = %+v\nwant %+v", final, want)
	}
	wantLog := "step 1: write done, next review\nstep 2: review done, next write\nstep 3: write done, next review\nstep 4: review done, next end\n"
	if log.String() != wantLog {
		t.Errorf("log = %q\nwant %q", log.String(), wantLog)
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
