package main

import (
	"strings"
	"testing"

	"github.com/calf-go/calf/model/models"
	"github.com/calf-go/calf/model/modeltest"
)

// The first agent answers with what its model says. The model is a fake
// OpenAI-compatible server, opened by models.Open as the guide's
// -model 'URL#NAME' does: no API key, no network.
func TestFirstAgent(t *testing.T) {
	script := modeltest.NewTestModel(modeltest.Text("Paris."))
	srv := modeltest.NewServer(script.Generate)
	defer srv.Close()
	m, err := models.Open(srv.URL()+"#test", nil)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := run(t.Context(), m, &out); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != "Paris.\n" {
		t.Errorf("printed %q, want Paris.", got)
	}
	req := script.Requests()[0]
	if got := req.Messages[len(req.Messages)-1].Text(); got != "What is the capital of France?" {
		t.Errorf("the model was asked %q", got)
	}
}
