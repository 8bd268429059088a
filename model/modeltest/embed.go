package modeltest

import (
	"context"
	"encoding/json"
	"hash/fnv"
	"math"
	"net/http"
	"strings"
	"unicode"
)

// HashEmbedder is a fake [model.Embedder] for tests: a text's vector
// counts its words (lower-cased, hashed into Dim buckets), normalized, so
// that texts sharing words are near each other. Dim defaults to 64.
type HashEmbedder struct {
	Dim int
}

// Name returns "hash".
func (HashEmbedder) Name() string { return "hash" }

// Embed returns the vectors of texts.
func (e HashEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, t := range texts {
		out[i] = e.vector(t)
	}
	return out, nil
}

func (e HashEmbedder) vector(text string) []float32 {
	dim := e.Dim
	if dim <= 0 {
		dim = 64
	}
	v := make([]float32, dim)
	for _, w := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		h := fnv.New32a()
		h.Write([]byte(w))
		v[h.Sum32()%uint32(dim)]++
	}
	var n float64
	for _, x := range v {
		n += float64(x) * float64(x)
	}
	if n > 0 {
		for i := range v {
			v[i] = float32(float64(v[i]) / math.Sqrt(n))
		}
	}
	return v
}

// embeddings serves POST /v1/embeddings: {"model", "input": string or
// [string]} in, {"data": [{"index", "embedding"}], "model", "usage"} out.
func (s *Server) embeddings(w http.ResponseWriter, r *http.Request) {
	s.requests.Add(1)
	var req struct {
		Model string          `json:"model"`
		Input json.RawMessage `json:"input"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 8<<20)).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "invalid JSON: "+err.Error())
		return
	}
	var texts []string
	if err := json.Unmarshal(req.Input, &texts); err != nil {
		var one string
		if err := json.Unmarshal(req.Input, &one); err != nil {
			writeError(w, http.StatusBadRequest, "invalid_request_error", "input must be a string or an array of strings")
			return
		}
		texts = []string{one}
	}
	if len(texts) == 0 {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "input is empty")
		return
	}
	vecs, err := s.opts.Embedder.Embed(r.Context(), texts)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "server_error", err.Error())
		return
	}
	type item struct {
		Object    string    `json:"object"`
		Index     int       `json:"index"`
		Embedding []float32 `json:"embedding"`
	}
	out := struct {
		Object string         `json:"object"`
		Data   []item         `json:"data"`
		Model  string         `json:"model"`
		Usage  map[string]int `json:"usage"`
	}{Object: "list", Model: req.Model, Usage: map[string]int{"prompt_tokens": 0, "total_tokens": 0}}
	for i, v := range vecs {
		out.Data = append(out.Data, item{Object: "embedding", Index: i, Embedding: v})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}
