package models_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/models"
)

// Open a model by name. Here the environment points the openai provider at
// a local stand-in for an OpenAI-compatible server; in a program it is
// the process's environment (OPENAI_API_KEY, ANTHROPIC_API_KEY, ...).
func ExampleOpen() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"1","model":"llama3.2","choices":[{"index":0,"message":{"role":"assistant","content":"Paris."},"finish_reason":"stop"}]}`)
	}))
	defer srv.Close()
	environment := map[string]string{"OPENAI_BASE_URL": srv.URL + "/v1"}

	m, err := models.Open("openai:llama3.2", &models.Options{Getenv: func(k string) string { return environment[k] }})
	if err != nil {
		fmt.Println(err)
		return
	}
	resp, err := m.Generate(context.Background(), &model.Request{Messages: []model.Message{model.UserMessage("Capital of France?")}})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(m.Name(), "says", resp.Message.Text())
	// Output: openai:llama3.2 says Paris.
}
