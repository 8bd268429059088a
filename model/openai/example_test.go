package openai_test

import (
	"context"
	"fmt"

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
