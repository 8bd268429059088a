package tool

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/calf-go/calf/model"
)

// Kind classifies what a tool does beyond answering the model, for the
// permission modes that decide which calls need a user's approval.
type Kind string

// The kinds of tools, from the least to the most consequential.
const (
	// KindRead tools only read: files, a database, the state of the run.
	KindRead Kind = "read"
	// KindEdit tools change files or records in a place the user chose.
	KindEdit Kind = "edit"
	// KindExecute tools run commands or code.
	KindExecute Kind = "execute"
	// KindNetwork tools reach other machines: fetching, searching,
	// sending.
	KindNetwork Kind = "network"
)

// Valid reports whether k is one of the four kinds.
func (k Kind) Valid() bool {
	switch k {
	case KindRead, KindEdit, KindExecute, KindNetwork:
		return true
	}
	return false
}

// Classified is implemented by tools that declare their kind.
type Classified interface {
	Tool
	Kind() Kind
}

// KindOf returns the kind t declares, or [KindExecute] for a tool that
// declares none (or an invalid one): a tool of unknown effect is treated as
// one that may do anything.
func KindOf(t Tool) Kind {
	if c, ok := t.(Classified); ok {
		if k := c.Kind(); k.Valid() {
			return k
		}
	}
	return KindExecute
}

// Classify returns t declaring kind k ([KindOf] t is k), for the
// permission modes; t itself is unchanged. It panics if k is not one of
// the four kinds, a programming error.
func Classify(t Tool, k Kind) Tool {
	if !k.Valid() {
		panic(fmt.Sprintf("tool: Classify(%q): unknown kind %q", t.Definition().Name, k))
	}
	return &classified{t: t, kind: k}
}

type classified struct {
	t    Tool
	kind Kind
}

func (c *classified) Definition() model.ToolDefinition { return c.t.Definition() }

func (c *classified) Call(ctx context.Context, args json.RawMessage) (*Result, error) {
	return c.t.Call(ctx, args)
}

func (c *classified) Kind() Kind { return c.kind }

// Unwrap returns the tool c classifies.
func (c *classified) Unwrap() Tool { return c.t }
