package openai_test

import (
	"context"
	"errors"
	"testing"

	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/model/openai"
)

// failingEmbedder fails every call.
type failingEmbedder struct{}

func (failingEmbedder) Name() string { return "failing" }
func (failingEmbedder) Embed(context.Context, []string) ([][]float32, error) {
	return nil, errors.New("the index is rebuilding")
}

func TestEmbedder(t *testing.T) {
	srv := modeltest.NewServer(nil)
	defer srv.Close()
	e, err := openai.NewEmbedder(openai.Options{Model: "text-embedding-3-small", BaseURL: srv.URL()})
	if err != nil {
		t.Fatal(err)
	}
	if e.Name() != "openai:text-embedding-3-small" {
		t.Errorf("name %q", e.Name())
	}
	texts := []string{"the cat sat", "a cat sat down", "stock prices fell"}
	got, err := e.Embed(t.Context(), texts)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := modeltest.HashEmbedder{}.Embed(t.Context(), texts)
	if len(got) != 3 || len(got[0]) != 64 {
		t.Fatalf("%d vectors of %d", len(got), len(got[0]))
	}
	for i := range want {
		for j := range want[i] {
			if got[i][j] != want[i][j] {
				t.Fatalf("vector %d differs from the server's at %d", i, j)
			}
		}
	}
	if v, err := e.Embed(t.Context(), nil); err != nil || v != nil {
		t.Errorf("no texts: %v, %v", v, err)
	}
	// The server's failure is a status error.
	bad := modeltest.NewServerWithOptions(nil, &modeltest.ServerOptions{Embedder: failingEmbedder{}})
	defer bad.Close()
	e2, _ := openai.NewEmbedder(openai.Options{Model: "m", BaseURL: bad.URL(), MaxRetries: -1})
	var se *model.StatusError
	if _, err := e2.Embed(t.Context(), texts); !errors.As(err, &se) || se.StatusCode != 500 {
		t.Errorf("a failing server: %v", err)
	}
	if _, err := openai.NewEmbedder(openai.Options{BaseURL: srv.URL()}); !errors.Is(err, model.ErrNoModel) {
		t.Errorf("no model: %v", err)
	}
}
