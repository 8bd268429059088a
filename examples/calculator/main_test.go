package main

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/calf-go/calf/examples/internal/extest"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/cassette"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/model/openai"
)

// TestCalculator runs the example through model/openai, replaying
// testdata/calculator.httprr: two tool calls, then the answer. The
// committed cassette was recorded against a local OpenAI-compatible server
// (model/modeltest's) answering with the script below; to record it
// against a real provider instead:
//
//	CALF_RECORD=1 OPENAI_API_KEY=... go test -run '^TestCalculator$' ./examples/calculator
//
// A change to what the example sends (its prompt, tools or schema) makes
// the replay fail with the difference; record the cassette again then.
func TestCalculator(t *testing.T) {
	m := extest.Model(t, "testdata/calculator.httprr", modeltest.NewTestModel(
		modeltest.ToolCalls(modeltest.Call("call_add", "add", `{"a":2,"b":3}`)),
		modeltest.ToolCalls(modeltest.Call("call_multiply", "multiply", `{"a":5,"b":7}`)),
		func(_ context.Context, req *model.Request) (*model.Response, error) {
			return modeltest.Text("(2 + 3) * 7 = " + req.Messages[len(req.Messages)-1].Text() + "."), nil
		},
	).Generate)
	var log strings.Builder
	answer, err := run(t.Context(), m, "What is (2 + 3) * 7?", &log)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(answer, "35") {
		t.Errorf("answer = %q, want 35 in it", answer)
	}
	// The tools ran on what the model asked: 2 + 3, then 5 × 7.
	for _, want := range []string{"-> add(", "<- 5\n", "-> multiply(", "<- 35\n"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, log.String())
		}
	}
}

// TestCalculatorCassetteRejectsChangedRequest replays the cassette for
// another question: the first request no longer matches, and the run
// fails with the cassette's difference instead of a recorded answer.
func TestCalculatorCassetteRejectsChangedRequest(t *testing.T) {
	m, err := openai.New(openai.Options{
		Model: extest.ModelName, APIKey: "replayed", BaseURL: "http://127.0.0.1:9/v1", MaxRetries: -1,
		HTTPClient: cassette.ForTest(t, "testdata/calculator.httprr", &cassette.Options{Mode: cassette.Replay}),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	_, err = run(ctx, m, "What is (2 + 4) * 7?", io.Discard)
	if err == nil {
		t.Fatal("a changed question replayed without error")
	}
	for _, want := range []string{"no recorded exchange matches", `string("What is (2 + 3) * 7?")`, `string("What is (2 + 4) * 7?")`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}
