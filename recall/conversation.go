package recall

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/store"
)

// KindConversation is the store kind of a [Conversation]'s items: id
// "{namespace}/{scope}/{item id}".
const KindConversation = "recall_conversation"

// ConversationOptions configure a [Conversation].
type ConversationOptions struct {
	// Namespace keeps this memory's items apart from others' in the same
	// store. Default "default".
	Namespace string
	// Scope names whose exchanges a run remembers and sees: by default the
	// agent's name, so that every run of an agent sees the agent's latest
	// exchanges; a user's id (taken from the session id, say) keeps users
	// apart.
	Scope func(in *agent.MemoryContext) string
	// K is how many of the latest exchanges UpdateContext adds. Default 5.
	K int
	// Keep is how many items a scope keeps; older ones are removed as new
	// ones come. Default 100.
	Keep int
	// Header starts the message UpdateContext adds. Default: "Earlier
	// exchanges, oldest first:".
	Header string
	// Now returns the current time. Default: time.Now.
	Now func() time.Time
}

// Conversation remembers the exchanges (the prompt and the answer) of the
// completed runs of the agents that use it, per scope, and shows the
// latest of them to the next runs, before their first model call. Add
// puts items in the default scope ("").
type Conversation struct {
	s    store.Store
	opts ConversationOptions
}

var _ Memory = (*Conversation)(nil)
var _ agent.Rememberer = (*Conversation)(nil)

type storedExchange struct {
	Item
	At time.Time `json:"at"`
}

// NewConversation returns a conversation memory that keeps its items in s.
func NewConversation(s store.Store, opts *ConversationOptions) (*Conversation, error) {
	var o ConversationOptions
	if opts != nil {
		o = *opts
	}
	o.Namespace = cmp.Or(o.Namespace, "default")
	if err := checkNamespace(o.Namespace); err != nil {
		return nil, err
	}
	if o.K < 0 || o.Keep < 0 {
		return nil, fmt.Errorf("recall: ConversationOptions.K and Keep must not be negative")
	}
	o.K, o.Keep = cmp.Or(o.K, 5), cmp.Or(o.Keep, 100)
	o.Header = cmp.Or(o.Header, "Earlier exchanges, oldest first:")
	if o.Scope == nil {
		o.Scope = func(in *agent.MemoryContext) string { return in.Agent }
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if s == nil {
		return nil, fmt.Errorf("recall: a conversation memory needs a store")
	}
	return &Conversation{s: s, opts: o}, nil
}

func (c *Conversation) prefix(scope string) string {
	return c.opts.Namespace + "/" + strings.ReplaceAll(scope, "/", "%2F") + "/"
}

// Add stores items in the default scope.
func (c *Conversation) Add(ctx context.Context, items ...Item) error {
	return c.add(ctx, "", items...)
}

func (c *Conversation) add(ctx context.Context, scope string, items ...Item) error {
	for i, it := range items {
		if it.Text == "" {
			return fmt.Errorf("%w (item %d)", ErrEmpty, i)
		}
		it.ID = itemID(it)
		data, err := json.Marshal(storedExchange{Item: it, At: c.opts.Now()})
		if err != nil {
			return err
		}
		if _, err := store.Update(ctx, c.s, KindConversation, c.prefix(scope)+it.ID, func(old []byte, exists bool) ([]byte, error) {
			if exists {
				return nil, nil // remembered already: keep its time
			}
			return data, nil
		}); err != nil {
			return fmt.Errorf("recall: add %s: %w", it.ID, err)
		}
	}
	return c.trim(ctx, scope)
}

// latest returns the items of scope, newest first.
func (c *Conversation) latest(ctx context.Context, scope string) ([]storedExchange, error) {
	var out []storedExchange
	for after := ""; ; {
		recs, err := c.s.List(ctx, KindConversation, c.prefix(scope), after, 500)
		if err != nil {
			return nil, fmt.Errorf("recall: %w", err)
		}
		for _, rec := range recs {
			var e storedExchange
			if err := json.Unmarshal(rec.Data, &e); err != nil {
				return nil, fmt.Errorf("recall: item %s: %v", rec.ID, err)
			}
			out = append(out, e)
		}
		if len(recs) < 500 {
			break
		}
		after = recs[len(recs)-1].ID
	}
	slices.SortStableFunc(out, func(a, b storedExchange) int { return b.At.Compare(a.At) })
	return out, nil
}

// trim removes the oldest items of scope beyond Keep.
func (c *Conversation) trim(ctx context.Context, scope string) error {
	all, err := c.latest(ctx, scope)
	if err != nil || len(all) <= c.opts.Keep {
		return err
	}
	for _, e := range all[c.opts.Keep:] {
		if err := c.s.Delete(ctx, KindConversation, c.prefix(scope)+e.ID, 0); err != nil {
			return fmt.Errorf("recall: trim: %w", err)
		}
	}
	return nil
}

// Query returns the latest k items of the default scope whose text holds
// q (ignoring case; any item when q is empty), newest first.
func (c *Conversation) Query(ctx context.Context, q string, k int) ([]Match, error) {
	return c.query(ctx, "", q, k)
}

func (c *Conversation) query(ctx context.Context, scope, q string, k int) ([]Match, error) {
	all, err := c.latest(ctx, scope)
	if err != nil {
		return nil, err
	}
	var out []Match
	for _, e := range all {
		if len(out) == k {
			break
		}
		if q == "" || strings.Contains(strings.ToLower(e.Text), strings.ToLower(q)) {
			out = append(out, Match{Item: e.Item, Score: 1})
		}
	}
	return out, nil
}

// UpdateContext returns a message with the K latest exchanges of the run's
// scope, oldest first, before the run's first model call.
func (c *Conversation) UpdateContext(ctx context.Context, in *agent.MemoryContext) ([]model.Message, error) {
	if in.Step != 1 {
		return nil, nil
	}
	ms, err := c.query(ctx, c.opts.Scope(in), "", c.opts.K)
	if err != nil || len(ms) == 0 {
		return nil, err
	}
	slices.Reverse(ms)
	return []model.Message{model.SystemMessage(render(c.opts.Header, ms))}, nil
}

// Remember keeps the exchange of a completed run in its scope.
func (c *Conversation) Remember(ctx context.Context, in *agent.MemoryContext, added []model.Message) error {
	text := exchange(added)
	if text == "" {
		return nil
	}
	return c.add(ctx, c.opts.Scope(in), Item{ID: "run-" + in.RunID, Text: text, Metadata: map[string]string{"agent": in.Agent, "run": in.RunID}})
}
