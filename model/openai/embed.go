package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/calf-go/calf/model"
)

// Embedder computes embeddings with an OpenAI-compatible /v1/embeddings
// endpoint: OpenAI's ("text-embedding-3-small"), Azure OpenAI's
// deployment, or a local server's (Ollama's "nomic-embed-text"). It is
// safe for concurrent use.
type Embedder struct {
	ep  *endpoint
	url string
}

var _ model.Embedder = (*Embedder)(nil)

// NewEmbedder returns an embedder configured by opts, as [New] configures
// a model; opts.Model names the embedding model.
func NewEmbedder(opts Options) (*Embedder, error) {
	ep, err := newEndpoint(opts)
	if err != nil {
		return nil, err
	}
	return &Embedder{ep: ep, url: ep.url("embeddings")}, nil
}

// Name returns "openai:" and the embedding model's name.
func (e *Embedder) Name() string { return "openai:" + e.ep.model }

type wireEmbeddingRequest struct {
	Model          string   `json:"model"`
	Input          []string `json:"input"`
	EncodingFormat string   `json:"encoding_format"`
}

type wireEmbeddings struct {
	Data []struct {
		Index     int       `json:"index"`
		Embedding []float32 `json:"embedding"`
	} `json:"data"`
}

// Embed returns the embeddings of texts, in order. Errors are those of
// [Model.Generate].
func (e *Embedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if len(texts) == 0 {
		return nil, nil
	}
	body, err := json.Marshal(wireEmbeddingRequest{Model: e.ep.wireModel, Input: texts, EncodingFormat: "float"})
	if err != nil {
		return nil, fmt.Errorf("openai: encode request: %w", err)
	}
	var w wireEmbeddings
	if err := e.ep.postJSON(ctx, e.url, body, &w, "JSON embeddings"); err != nil {
		return nil, err
	}
	out := make([][]float32, len(texts))
	for _, d := range w.Data {
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
