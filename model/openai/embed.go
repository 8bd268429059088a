package openai

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/calf-go/calf/model"
)

// Embedder computes embeddings with an OpenAI-compatible /v1/embeddings
// endpoint: OpenAI's ("text-embedding-3-small"), or a local server's
// (Ollama's "nomic-embed-text"). It is safe for concurrent use.
type Embedder struct {
	model  string
	client sdk.Client
	// unversioned: see Model.
	unversioned string
}

var _ model.Embedder = (*Embedder)(nil)

// NewEmbedder returns an embedder configured by opts, as [New] configures
// a model; opts.Model names the embedding model.
func NewEmbedder(opts Options) (*Embedder, error) {
	c, u, err := newClient(opts)
	if err != nil {
		return nil, err
	}
	return &Embedder{model: opts.Model, client: c, unversioned: unversioned(u)}, nil
}

// Name returns "openai:" and the embedding model's name.
func (e *Embedder) Name() string { return "openai:" + e.model }

// Embed returns the embeddings of texts, in order.
func (e *Embedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if len(texts) == 0 {
		return nil, nil
	}
	body := map[string]any{"model": e.model, "input": texts, "encoding_format": "float"}
	var resp struct {
		Data []struct {
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		} `json:"data"`
	}
	var raw *http.Response
	if err := e.client.Post(ctx, "embeddings", body, &resp, option.WithResponseInto(&raw)); err != nil {
		return nil, (&Model{model: e.model, unversioned: e.unversioned}).wrapError(ctx, err, raw)
	}
	out := make([][]float32, len(texts))
	for _, d := range resp.Data {
		if d.Index < 0 || d.Index >= len(texts) || out[d.Index] != nil {
			return nil, fmt.Errorf("openai: embeddings: the server answered with index %d for %d texts", d.Index, len(texts))
		}
		out[d.Index] = d.Embedding
	}
	for i, v := range out {
		if len(v) == 0 {
			return nil, fmt.Errorf("openai: embeddings: %w for text %d", errNoEmbedding, i)
		}
	}
	return out, nil
}

var errNoEmbedding = errors.New("no embedding")
