package recall

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/store/adapter"
)

// Memory stores items and finds them again.
type Memory interface {
	agent.Memory
	// Add stores items, replacing those with the same ids.
	Add(ctx context.Context, items ...Item) error
	// Query returns at most k items that match q, best first.
	Query(ctx context.Context, q string, k int) ([]Match, error)
}

// Item is something to remember.
type Item struct {
	// ID identifies the item: adding an item with the id of another
	// replaces it. Default: a digest of its text.
	ID       string            `json:"id"`
	Text     string            `json:"text"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

// Match is an item a query found, with how well it matches (for a
// [Vector], the cosine similarity, from -1 to 1).
type Match struct {
	Item
	Score float32 `json:"score"`
}

// ErrEmpty is returned by Add for an item without text.
var ErrEmpty = errors.New("recall: an item needs text")

// itemID returns the item's id, or a digest of its text.
func itemID(it Item) string {
	if it.ID != "" {
		return it.ID
	}
	sum := sha256.Sum256([]byte(it.Text))
	return hex.EncodeToString(sum[:16])
}

// checkNamespace validates a namespace: it becomes part of store ids.
func checkNamespace(ns string) error {
	if ns == "" || strings.ContainsAny(ns, "/\x00") || len(ns) > 128 {
		return fmt.Errorf("recall: namespace %q: give 1 to 128 characters, without '/'", ns)
	}
	return adapter.CheckKey("recall", ns)
}

// render turns matches into the text of a context message.
func render(header string, ms []Match) string {
	var b strings.Builder
	b.WriteString(header)
	for _, m := range ms {
		b.WriteString("\n- ")
		b.WriteString(strings.ReplaceAll(strings.TrimSpace(m.Text), "\n", "\n  "))
	}
	return b.String()
}
