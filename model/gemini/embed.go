package gemini

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/calf-go/calf/model"
)

// maxEmbedBatch is the most texts one batchEmbedContents request carries.
const maxEmbedBatch = 100

// Embedder is a [model.Embedder] for Gemini's embedding models, such as
// "gemini-embedding-001", through batchEmbedContents. It is safe for
// concurrent use.
type Embedder struct {
	*client
}

var _ model.Embedder = (*Embedder)(nil)

// NewEmbedder returns an embedder configured by opts, whose Model names the
// embedding model; ThinkingBudget does not apply. It fails as [New] does.
func NewEmbedder(opts Options) (*Embedder, error) {
	c, err := newClient(&opts)
	if err != nil {
		return nil, err
	}
	return &Embedder{client: c}, nil
}

// Name returns "gemini:" followed by the model name.
func (e *Embedder) Name() string { return "gemini:" + e.name }

// Embed returns one vector per text, in order, asking for up to 100 texts
// per request. Errors are those of [Model.Generate].
func (e *Embedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, 0, len(texts))
	for start := 0; start < len(texts); start += maxEmbedBatch {
		batch := texts[start:min(start+maxEmbedBatch, len(texts))]
		req := wireEmbedRequest{Requests: make([]wireEmbedContentRequest, len(batch))}
		for i, t := range batch {
			req.Requests[i] = wireEmbedContentRequest{Model: e.resource, Content: wireContent{Parts: []wirePart{{Text: t}}}}
		}
		body, err := json.Marshal(req)
		if err != nil {
			return nil, fmt.Errorf("gemini: encode request: %w", err)
		}
		resp, err := e.do(ctx, "batchEmbedContents", body)
		if err != nil {
			return nil, err
		}
		data, err := io.ReadAll(resp.Body)
		resp.Close()
		if err != nil {
			return nil, e.readError(ctx, err)
		}
		var w wireEmbedResponse
		if err := json.Unmarshal(data, &w); err != nil {
			return nil, fmt.Errorf("gemini: %s: the answer is not a JSON BatchEmbedContentsResponse: %w", e.name, err)
		}
		if len(w.Embeddings) != len(batch) {
			return nil, fmt.Errorf("gemini: %s: %d embeddings for %d texts", e.name, len(w.Embeddings), len(batch))
		}
		for _, emb := range w.Embeddings {
			out = append(out, emb.Values)
		}
	}
	return out, nil
}
