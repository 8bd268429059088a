package gemini_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/gemini"
)

func Example() {
	// A stand-in for the Generative Language API, so that the example runs
	// offline; leave BaseURL empty to call Google's.
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"candidates":[{"content":{"role":"model","parts":[{"text":"Paris."}]},"finishReason":"STOP"}],
			"usageMetadata":{"promptTokenCount":7,"candidatesTokenCount":2,"totalTokenCount":9},
			"modelVersion":"gemini-2.5-flash","responseId":"r1"}`)
	}))
	defer api.Close()

	m, err := gemini.New(gemini.Options{Model: "gemini-2.5-flash", APIKey: "my-key", BaseURL: api.URL})
	if err != nil {
		panic(err)
	}
	resp, err := m.Generate(context.Background(), &model.Request{Messages: []model.Message{
		model.SystemMessage("Answer in one word."),
		model.UserMessage("What is the capital of France?"),
	}})
	if err != nil {
		panic(err)
	}
	fmt.Println(m.Name(), resp.Message.Text(), resp.FinishReason, resp.Usage.InputTokens, resp.Usage.OutputTokens)
	// Output: gemini:gemini-2.5-flash Paris. stop 7 2
}

func ExampleModel_CheckSchema() {
	m, err := gemini.New(gemini.Options{Model: "gemini-2.5-flash", APIKey: "my-key"})
	if err != nil {
		panic(err)
	}
	fmt.Println(m.CheckSchema(json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`)))
	fmt.Println(m.CheckSchema(json.RawMessage(`{"type":"object","properties":{"scores":{"type":"object","additionalProperties":{"type":"number"}}}}`)))
	// Output:
	// <nil>
	// gemini: schema keyword /properties/scores/additionalProperties: additionalProperties with a schema (a map) is not supported: Gemini's objects have named properties only
}
