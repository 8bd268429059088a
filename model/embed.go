package model

import "context"

// An Embedder turns texts into vectors whose nearness says how alike the
// texts are: model/openai's Embedder calls any OpenAI-compatible
// /v1/embeddings endpoint, and model/modeltest has a fake.
type Embedder interface {
	// Name names the embedding model.
	Name() string
	// Embed returns one vector per text, in order.
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}
