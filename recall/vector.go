package recall

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/store"
)

// KindVector is the store kind of a [Vector]'s items: id
// "{namespace}/{item id}".
const KindVector = "recall_vector"

// VectorOptions configure a [Vector].
type VectorOptions struct {
	// Namespace keeps this memory's items apart from others' in the same
	// store. Default "default".
	Namespace string
	// K is how many items UpdateContext adds. Default 5.
	K int
	// MinScore is the least similarity an item needs to be added by
	// UpdateContext. Default 0: any.
	MinScore float32
	// EveryStep has UpdateContext search before each model call of a run,
	// with the last user message; by default only before the first, since
	// the question does not change within a run.
	EveryStep bool
	// RememberRuns has the memory add, as an item, the exchange of each
	// completed run of the agents that use it (the prompt and the answer).
	RememberRuns bool
	// Header starts the message UpdateContext adds. Default: "Things you
	// remember that may help:".
	Header string
}

// Vector is a semantic memory over a state store: items are embedded
// when added, and a query returns the items nearest to it (exact cosine
// similarity over the namespace's items). It is safe for concurrent use,
// and every process on the same store sees the same items.
type Vector struct {
	s    store.Store
	e    model.Embedder
	opts VectorOptions
}

var _ Memory = (*Vector)(nil)
var _ agent.Rememberer = (*Vector)(nil)

type storedVector struct {
	Item
	Vector   []float32 `json:"vector"`
	Embedder string    `json:"embedder"`
}

// NewVector returns a vector memory that keeps its items in s and embeds
// them with e.
func NewVector(s store.Store, e model.Embedder, opts *VectorOptions) (*Vector, error) {
	var o VectorOptions
	if opts != nil {
		o = *opts
	}
	o.Namespace = cmp.Or(o.Namespace, "default")
	if err := checkNamespace(o.Namespace); err != nil {
		return nil, err
	}
	if o.K < 0 {
		return nil, fmt.Errorf("recall: VectorOptions.K is %d", o.K)
	}
	o.K = cmp.Or(o.K, 5)
	o.Header = cmp.Or(o.Header, "Things you remember that may help:")
	if s == nil || e == nil {
		return nil, fmt.Errorf("recall: a vector memory needs a store and an embedder")
	}
	return &Vector{s: s, e: e, opts: o}, nil
}

// Add embeds items and stores them, replacing those with the same ids.
func (v *Vector) Add(ctx context.Context, items ...Item) error {
	if len(items) == 0 {
		return nil
	}
	texts := make([]string, len(items))
	for i, it := range items {
		if it.Text == "" {
			return fmt.Errorf("%w (item %d)", ErrEmpty, i)
		}
		texts[i] = it.Text
	}
	vecs, err := v.e.Embed(ctx, texts)
	if err != nil {
		return fmt.Errorf("recall: embed: %w", err)
	}
	if len(vecs) != len(items) {
		return fmt.Errorf("recall: embed: %d vectors for %d texts", len(vecs), len(items))
	}
	for i, it := range items {
		it.ID = itemID(it)
		data, err := json.Marshal(storedVector{Item: it, Vector: vecs[i], Embedder: v.e.Name()})
		if err != nil {
			return err
		}
		if _, err := store.Update(ctx, v.s, KindVector, v.opts.Namespace+"/"+it.ID, func([]byte, bool) ([]byte, error) { return data, nil }); err != nil {
			return fmt.Errorf("recall: add %s: %w", it.ID, err)
		}
	}
	return nil
}

// Delete removes the item id. Removing a missing item is not an error.
func (v *Vector) Delete(ctx context.Context, id string) error {
	return v.s.Delete(ctx, KindVector, v.opts.Namespace+"/"+id, 0)
}

// Query returns the k items nearest to q, best first.
func (v *Vector) Query(ctx context.Context, q string, k int) ([]Match, error) {
	if k <= 0 || q == "" {
		return nil, nil
	}
	qv, err := v.e.Embed(ctx, []string{q})
	if err != nil {
		return nil, fmt.Errorf("recall: embed the query: %w", err)
	}
	if len(qv) != 1 {
		return nil, fmt.Errorf("recall: embed the query: %d vectors for 1 text", len(qv))
	}
	var out []Match
	prefix := v.opts.Namespace + "/"
	for after := ""; ; {
		recs, err := v.s.List(ctx, KindVector, prefix, after, 500)
		if err != nil {
			return nil, fmt.Errorf("recall: query: %w", err)
		}
		for _, rec := range recs {
			var sv storedVector
			if err := json.Unmarshal(rec.Data, &sv); err != nil {
				return nil, fmt.Errorf("recall: item %s: %v", rec.ID, err)
			}
			if len(sv.Vector) != len(qv[0]) {
				return nil, fmt.Errorf("recall: item %s has %d dimensions and the query %d: it was embedded by %s, the query by %s",
					sv.ID, len(sv.Vector), len(qv[0]), sv.Embedder, v.e.Name())
			}
			out = append(out, Match{Item: sv.Item, Score: cosine(qv[0], sv.Vector)})
		}
		if len(recs) < 500 {
			break
		}
		after = recs[len(recs)-1].ID
	}
	slices.SortStableFunc(out, func(a, b Match) int { return cmp.Compare(b.Score, a.Score) })
	return out[:min(k, len(out))], nil
}

// UpdateContext returns a message with the K items nearest to the last
// user message, before the first model call of a run (before each, with
// EveryStep).
func (v *Vector) UpdateContext(ctx context.Context, in *agent.MemoryContext) ([]model.Message, error) {
	if in.Step != 1 && !v.opts.EveryStep {
		return nil, nil
	}
	ms, err := v.Query(ctx, lastUserText(in.Messages), v.opts.K)
	if err != nil {
		return nil, err
	}
	ms = slices.DeleteFunc(ms, func(m Match) bool { return m.Score < v.opts.MinScore })
	if len(ms) == 0 {
		return nil, nil
	}
	return []model.Message{model.SystemMessage(render(v.opts.Header, ms))}, nil
}

// Remember adds the exchange of a completed run, with RememberRuns: the
// prompt and the answer, under the run's id.
func (v *Vector) Remember(ctx context.Context, in *agent.MemoryContext, added []model.Message) error {
	if !v.opts.RememberRuns {
		return nil
	}
	text := exchange(added)
	if text == "" {
		return nil
	}
	return v.Add(ctx, Item{ID: "run-" + in.RunID, Text: text, Metadata: map[string]string{"agent": in.Agent, "run": in.RunID, "session": in.SessionID}})
}

// exchange is the text of a run's prompt and answer.
func exchange(msgs []model.Message) string {
	var q, a string
	for _, m := range msgs {
		switch {
		case m.Role == model.RoleUser && q == "":
			q = m.Text()
		case m.Role == model.RoleAssistant && m.Text() != "":
			a = m.Text()
		}
	}
	if q == "" || a == "" {
		return ""
	}
	return "Q: " + q + "\nA: " + a
}

func cosine(a, b []float32) float32 {
	var dot, na, nb float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	if na == 0 || nb == 0 {
		return 0
	}
	return float32(dot / (math.Sqrt(na) * math.Sqrt(nb)))
}

// lastUserText returns the text of the last user message of msgs, the
// query of a memory.
func lastUserText(msgs []model.Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == model.RoleUser {
			return msgs[i].Text()
		}
	}
	return ""
}
