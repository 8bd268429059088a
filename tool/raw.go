package tool

import (
	"bytes"
	"context"
	"encoding/json"

	"github.com/calf-go/calf/model"
)

// NewRaw returns a tool described by def, with a hand-written schema, that
// runs fn with the arguments as JSON text.
//
// Call treats empty or null arguments as {}, rejects malformed JSON with an
// [*ArgumentError] and, when def.Parameters is a valid JSON Schema,
// validates the arguments against it before running fn. A def.Parameters
// that is not a valid schema is sent to the model as is and arguments are
// not validated. fn's error is returned unchanged; a nil result without an
// error becomes an empty result.
//
// NewRaw does not check def.Name; [Set.Add] and [CheckName] do.
func NewRaw(def model.ToolDefinition, fn func(ctx context.Context, args json.RawMessage) (*Result, error)) Tool {
	def.Parameters = bytes.Clone(def.Parameters)
	t := &rawTool{def: def, fn: fn}
	if s, err := ParseSchema(def.Parameters); err == nil {
		t.schema = s
	}
	return t
}

type rawTool struct {
	def    model.ToolDefinition
	schema *Schema // nil when def.Parameters is not a valid schema
	fn     func(context.Context, json.RawMessage) (*Result, error)
}

func (t *rawTool) Definition() model.ToolDefinition {
	d := t.def
	d.Parameters = bytes.Clone(d.Parameters)
	return d
}

func (t *rawTool) Call(ctx context.Context, args json.RawMessage) (*Result, error) {
	args, err := checkArgs(t.def.Name, t.schema, args, false)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r, err := t.fn(ctx, args)
	if err != nil {
		return nil, err
	}
	if r == nil {
		r = &Result{}
	}
	return r, nil
}
