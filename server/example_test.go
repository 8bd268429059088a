package server_test

import (
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/local"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/runner"
	"github.com/calf-go/calf/server"
)

// An agent behind the OpenAI-compatible API: any OpenAI client reaches it
// with its name as the model. On the process's local runtime its first
// run serves it. A real program calls ListenAndServe, which listens on
// 127.0.0.1:8420.
func Example() {
	m := modeltest.NewTestModel(modeltest.Text("Paris."))
	a := agent.Must(agent.NewText("geographer", m, "Answer briefly."))
	s, err := server.New(local.Runtime(), []runner.Runner{runner.Agent(a)}, nil)
	if err != nil {
		log.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	defer hs.Close()

	body := `{"model": "geographer", "messages": [{"role": "user", "content": "What is the capital of France?"}]}`
	resp, err := http.Post(hs.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	var completion struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&completion); err != nil {
		log.Fatal(err)
	}
	fmt.Println(resp.StatusCode, completion.Choices[0].Message.Content)
	// Output: 200 Paris.
}
