package openai_test

import (
	"bytes"
	"io"
	"net/http"
	"testing"

	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/openai"
)

// canned is a transport that answers every request with body.
type canned struct {
	contentType string
	body        []byte
}

func (c canned) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {c.contentType}},
		Body: io.NopCloser(bytes.NewReader(c.body)), Request: r}, nil
}

// fuzzDecoder feeds body to m's Generate and GenerateStream: whatever the
// server sends, each ends with a response or an error, never a panic, and
// a stream yields nothing after its response or its error.
func fuzzDecoder(t *testing.T, newModel func(openai.Options) (streamingModel, error), body []byte) {
	for _, ct := range []string{"application/json", "text/event-stream"} {
		m, err := newModel(openai.Options{Model: "m", BaseURL: "http://fuzz.invalid/v1", MaxRetries: -1,
			HTTPClient: &http.Client{Transport: canned{ct, body}}})
		if err != nil {
			t.Fatal(err)
		}
		req := &model.Request{Messages: []model.Message{model.UserMessage("hi")}}
		if resp, err := m.Generate(t.Context(), req); (resp == nil) == (err == nil) {
			t.Fatalf("Generate = %v, %v", resp, err)
		}
		ended := false
		for c, err := range m.GenerateStream(t.Context(), req) {
			if ended {
				t.Fatal("a chunk after the end")
			}
			ended = err != nil || c.Response != nil
		}
		if !ended {
			t.Fatal("the stream ended without a response or an error")
		}
	}
}

func FuzzChatDecoder(f *testing.F) {
	f.Add([]byte(chatCompletionBody))
	f.Add([]byte(chatStreamBody))
	f.Add([]byte("data: [DONE]\n\n"))
	f.Add([]byte(chatChunk(`{"tool_calls":[{"index":3,"function":{"arguments":"x"}}]}`, "", "")))
	f.Fuzz(func(t *testing.T, body []byte) {
		fuzzDecoder(t, func(o openai.Options) (streamingModel, error) { return openai.New(o) }, body)
	})
}

func FuzzResponsesDecoder(f *testing.F) {
	resp := fullTurn()
	f.Add(asJSONBytes(f, resp))
	f.Add(streamEvents(resp, false))
	f.Add(streamEvents(resp, true))
	f.Add([]byte(`data: {"type":"response.function_call_arguments.delta","output_index":7,"delta":"x"}` + "\n\n"))
	f.Add([]byte(`data: {"type":"response.completed"}` + "\n\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		fuzzDecoder(t, func(o openai.Options) (streamingModel, error) { return openai.NewResponses(o) }, body)
	})
}
