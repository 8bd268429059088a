package openai_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/model/openai"
)

func ExampleNew() {
	// A stand-in for an OpenAI-compatible server such as Ollama.
	srv := modeltest.NewServer(func(ctx context.Context, req *model.Request) (*model.Response, error) {
		return modeltest.Text("Paris."), nil
	})
	defer srv.Close()

	m, err := openai.New(openai.Options{
		Model:   "llama3.2",
		BaseURL: srv.URL(), // such as "http://127.0.0.1:11434/v1"
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	resp, err := m.Generate(context.Background(), &model.Request{
		Messages: []model.Message{
			model.SystemMessage("Answer in one word."),
			model.UserMessage("What is the capital of France?"),
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(m.Name(), "says", resp.Message.Text())
	fmt.Println("tokens:", resp.Usage.TotalTokens)
	// Output:
	// openai:llama3.2 says Paris.
	// tokens: 11
}

func ExampleModel_GenerateStream() {
	srv := modeltest.NewServer(func(ctx context.Context, req *model.Request) (*model.Response, error) {
		return modeltest.Text("Once upon a time"), nil
	})
	defer srv.Close()
	m, err := openai.New(openai.Options{Model: "llama3.2", BaseURL: srv.URL()})
	if err != nil {
		fmt.Println(err)
		return
	}
	req := &model.Request{Messages: []model.Message{model.UserMessage("Tell me a story.")}}
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
	// "Once"
	// " upon"
	// " a"
	// " time"
	// finish: stop
}

func ExampleFromEnv() {
	// With neither OPENAI_API_KEY nor OPENAI_BASE_URL set, the error says
	// what to set.
	m, err := openai.FromEnv("gpt-4o-mini")
	if err != nil {
		fmt.Println("no model:", err)
		return
	}
	fmt.Println("using", m.Name())
}

func ExampleNewResponses() {
	// A stand-in for OpenAI's Responses API.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id": "resp_1", "object": "response", "status": "completed", "model": "o4-mini-2025-04-16",
  "output": [
    {"id": "rs_1", "type": "reasoning", "summary": [{"type": "summary_text", "text": "The capital of France."}],
     "encrypted_content": "gAAAAABo..."},
    {"id": "msg_1", "type": "message", "status": "completed", "role": "assistant",
     "content": [{"type": "output_text", "text": "Paris.", "annotations": []}]}],
  "usage": {"input_tokens": 20, "input_tokens_details": {"cached_tokens": 0},
    "output_tokens": 30, "output_tokens_details": {"reasoning_tokens": 24}, "total_tokens": 50}}`)
	}))
	defer srv.Close()

	m, err := openai.NewResponses(openai.Options{
		Model:            "o4-mini",
		BaseURL:          srv.URL + "/v1", // default: OpenAI's API
		APIKey:           "sk-example",
		ReasoningSummary: "auto",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	resp, err := m.Generate(context.Background(), &model.Request{
		Messages: []model.Message{model.UserMessage("What is the capital of France?")},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, p := range resp.Message.Parts {
		if p.Type == model.PartThinking {
			// Sent back with the conversation on the next turn.
			fmt.Printf("thinking %s: %s\n", p.ID, p.Text)
		}
	}
	fmt.Println(m.Name(), "says", resp.Message.Text())
	fmt.Println("reasoning tokens:", resp.Usage.ReasoningTokens)
	// Output:
	// thinking rs_1: The capital of France.
	// openai-responses:o4-mini says Paris.
	// reasoning tokens: 24
}

func ExampleAzureOptions() {
	// A stand-in for an Azure OpenAI resource.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Println(r.Method, r.URL.Path, r.URL.RawQuery, "api-key:", r.Header.Get("Api-Key"))
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-4o-2024-11-20",
  "choices": [{"index": 0, "message": {"role": "assistant", "content": "Paris."}, "finish_reason": "stop"}],
  "usage": {"prompt_tokens": 20, "completion_tokens": 2, "total_tokens": 22}}`)
	}))
	defer srv.Close()

	m, err := openai.New(openai.Options{
		Model:  "gpt-4o",
		APIKey: "azure-key", // default: $AZURE_OPENAI_API_KEY
		Azure: &openai.AzureOptions{
			Endpoint:   srv.URL, // such as "https://my-resource.openai.azure.com"
			Deployment: "chat",
			APIVersion: "2024-10-21",
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	resp, err := m.Generate(context.Background(), &model.Request{
		Messages: []model.Message{model.UserMessage("What is the capital of France?")},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(m.Name(), "says", resp.Message.Text())
	// Output:
	// POST /openai/deployments/chat/chat/completions api-version=2024-10-21 api-key: azure-key
	// openai:gpt-4o says Paris.
}
