package anthropic_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/anthropic"
)

// standIn answers like the Messages API: a message, or the same message
// as server-sent events when the request asks for a stream.
func standIn() *httptest.Server {
	const message = `{"id":"msg_01","type":"message","role":"assistant","model":"claude-haiku-4-5-20251001",` +
		`"content":[{"type":"text","text":"Paris is the capital of France."}],"stop_reason":"end_turn",` +
		`"usage":{"input_tokens":21,"cache_creation_input_tokens":0,"cache_read_input_tokens":1500,"output_tokens":9}}`
	const events = "event: message_start\n" +
		`data: {"type":"message_start","message":{"id":"msg_01","type":"message","role":"assistant","model":"claude-haiku-4-5-20251001","content":[],"usage":{"input_tokens":21,"cache_read_input_tokens":1500,"output_tokens":1}}}` + "\n\n" +
		"event: content_block_start\n" + `data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}` + "\n\n" +
		"event: content_block_delta\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Paris is"}}` + "\n\n" +
		"event: content_block_delta\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" the capital of France."}}` + "\n\n" +
		"event: content_block_stop\n" + `data: {"type":"content_block_stop","index":0}` + "\n\n" +
		"event: message_delta\n" + `data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":9}}` + "\n\n" +
		"event: message_stop\n" + `data: {"type":"message_stop"}` + "\n\n"
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct{ Stream bool }
		_ = json.NewDecoder(r.Body).Decode(&req)
		if req.Stream {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, events)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, message)
	}))
}

func ExampleNew() {
	srv := standIn() // a stand-in for the API
	defer srv.Close()

	m, err := anthropic.New(anthropic.Options{
		Model:   "claude-haiku-4-5",
		APIKey:  "sk-ant-...", // default: $ANTHROPIC_API_KEY
		BaseURL: srv.URL,      // default: https://api.anthropic.com
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	resp, err := m.Generate(context.Background(), &model.Request{
		Messages: []model.Message{
			model.SystemMessage("Answer in one sentence."),
			model.UserMessage("What is the capital of France?"),
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(m.Name(), "says", resp.Message.Text())
	fmt.Println("input tokens:", resp.Usage.InputTokens, "of which from the cache:", resp.Usage.CachedInputTokens)
	// Output:
	// anthropic:claude-haiku-4-5 says Paris is the capital of France.
	// input tokens: 1521 of which from the cache: 1500
}

func ExampleModel_GenerateStream() {
	srv := standIn()
	defer srv.Close()
	m, err := anthropic.New(anthropic.Options{Model: "claude-haiku-4-5", APIKey: "sk-ant-...", BaseURL: srv.URL})
	if err != nil {
		fmt.Println(err)
		return
	}
	req := &model.Request{Messages: []model.Message{model.UserMessage("What is the capital of France?")}}
	for chunk, err := range m.GenerateStream(context.Background(), req) {
		switch {
		case err != nil:
			fmt.Println(err)
			return
		case chunk.Delta != nil:
			fmt.Printf("%q\n", chunk.Delta.Text)
		case chunk.Response != nil:
			fmt.Println("finish:", chunk.Response.FinishReason)
		}
	}
	// Output:
	// "Paris is"
	// " the capital of France."
	// finish: stop
}

func ExampleFromEnv() {
	// With ANTHROPIC_API_KEY unset, the error says what to set.
	m, err := anthropic.FromEnv("claude-sonnet-4-5")
	if err != nil {
		fmt.Println("no model:", err)
		return
	}
	fmt.Println("using", m.Name())
}
