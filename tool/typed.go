package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/calf-go/calf/model"
)

// ErrInvalidName is returned for a tool name that providers do not accept:
// a name must be 1 to 64 letters, digits, '_' or '-'.
var ErrInvalidName = errors.New("tool: invalid name")

var validName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// CheckName returns an error matching [ErrInvalidName] unless name is 1 to
// 64 letters, digits, '_' or '-', the tool names OpenAI accepts.
func CheckName(name string) error {
	if !validName.MatchString(name) {
		return fmt.Errorf("%w %q: use 1 to 64 letters, digits, '_' or '-'", ErrInvalidName, name)
	}
	return nil
}

// Option configures a tool made by [New].
type Option func(*options)

type options struct {
	schema      *jsonschema.Schema
	typeSchemas map[reflect.Type]*jsonschema.Schema
}

// WithInputSchema sets the JSON Schema of the arguments instead of inferring
// it from the input type, for instance for a recursive type. The schema must
// describe an object. The arguments are validated against it and then
// decoded into the input type with encoding/json.
func WithInputSchema(s *jsonschema.Schema) Option {
	return func(o *options) { o.schema = s }
}

// WithTypeSchemas gives the schemas of particular types met while inferring
// the arguments' schema, such as a type with its own JSON encoding. They
// override the inferred ones.
func WithTypeSchemas(m map[reflect.Type]*jsonschema.Schema) Option {
	return func(o *options) { o.typeSchemas = m }
}

// New returns a tool named name that runs fn with its arguments decoded
// into In.
//
// The JSON Schema of the arguments is inferred from In, which must be
// described by a JSON object: a struct, a pointer to a struct, or a map
// with string keys. For a struct:
//   - property names are the fields' JSON names (from the json tag);
//   - a field is required unless its json tag has omitempty or omitzero;
//   - the `jsonschema` tag gives the property's description (it must not
//     start with "WORD=");
//   - an `enum` tag lists the allowed values, separated by commas, for a
//     string, number or boolean field or the elements of a slice field:
//     `enum:"celsius,fahrenheit"`;
//   - a `default` tag gives the property's default, shown to the model in
//     the schema and set in the arguments of a call that leaves the
//     property out: `default:"10"` (text for a string, number or boolean
//     field, JSON for others); the property is optional; a default the
//     property's schema refuses (outside its enum, say) is an error;
//   - properties that are not fields are rejected
//     ("additionalProperties": false), so that a misspelt argument is
//     reported to the model rather than silently dropped;
//   - a recursive type is an error matching [ErrRecursiveType]; use
//     [WithInputSchema] for it.
//
// Call treats empty or null arguments as {}, validates them against the
// schema, decodes them into In and runs fn; see [Tool]. An error returned
// by fn is returned by Call unchanged. fn's output becomes the result:
//   - a string is one text part;
//   - a [*Result] or [Result] is used as is;
//   - a [model.Part] or []model.Part gives the parts;
//   - a nil pointer, nil interface, or a struct without fields (such as
//     struct{}) gives an empty result: no parts and no structured content;
//   - any other value is encoded as JSON, which becomes both the result's
//     Structured content and its one text part.
func New[In, Out any](name, description string, fn func(ctx context.Context, in In) (Out, error), opts ...Option) (Tool, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	if fn == nil {
		return nil, fmt.Errorf("tool: %s: nil function", name)
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	var js *jsonschema.Schema
	if o.schema != nil {
		js = o.schema.CloneSchemas()
	} else {
		var err error
		if js, err = inferSchema(reflect.TypeFor[In](), o.typeSchemas); err != nil {
			return nil, fmt.Errorf("tool %s: %w", name, err)
		}
	}
	if !asObject(js) {
		return nil, fmt.Errorf("tool %s: %w, but %v is not", name, ErrNotObject, reflect.TypeFor[In]())
	}
	s, err := compile(js, false, name)
	if err != nil {
		return nil, fmt.Errorf("tool %s: %w", name, err)
	}
	return &typedTool[In, Out]{
		def:    model.ToolDefinition{Name: name, Description: description, Parameters: s.raw},
		schema: s,
		fn:     fn,
	}, nil
}

// Must returns t, and panics if err is not nil. It is meant for tools
// declared in package-level variables:
//
//	var weather = tool.Must(tool.New("weather", "...", getWeather))
func Must(t Tool, err error) Tool {
	if err != nil {
		panic(err)
	}
	return t
}

type typedTool[In, Out any] struct {
	def    model.ToolDefinition
	schema *Schema
	fn     func(context.Context, In) (Out, error)
}

func (t *typedTool[In, Out]) Definition() model.ToolDefinition {
	d := t.def
	d.Parameters = bytes.Clone(d.Parameters)
	return d
}

func (t *typedTool[In, Out]) Call(ctx context.Context, args json.RawMessage) (*Result, error) {
	args, err := checkArgs(t.def.Name, t.schema, args, true)
	if err != nil {
		return nil, err
	}
	var in In
	if err := json.Unmarshal(args, &in); err != nil {
		return nil, &ArgumentError{Tool: t.def.Name, Err: fmt.Errorf("arguments do not decode: %w", err)}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out, err := t.fn(ctx, in)
	if err != nil {
		return nil, err
	}
	return toResult(t.def.Name, out)
}

// checkArgs returns args, with empty or null arguments replaced by {}, if
// they are valid JSON that follows s (when s is not nil), and an
// *ArgumentError otherwise. With defaults, the properties left out that
// have a default in s are set to it first.
func checkArgs(name string, s *Schema, args json.RawMessage, defaults bool) (json.RawMessage, error) {
	if trimmed := bytes.TrimSpace(args); len(trimmed) == 0 || string(trimmed) == "null" {
		args = json.RawMessage("{}")
	}
	var v any
	if err := json.Unmarshal(args, &v); err != nil {
		return nil, &ArgumentError{Tool: name, Err: fmt.Errorf("arguments are not valid JSON: %w", err)}
	}
	if s != nil && defaults {
		set, err := s.withDefaults(&v)
		if err != nil {
			return nil, &ArgumentError{Tool: name, Err: fmt.Errorf("apply the defaults: %w", err)}
		}
		if set {
			if args, err = json.Marshal(v); err != nil {
				return nil, &ArgumentError{Tool: name, Err: err}
			}
		}
	}
	if s != nil {
		if err := s.validateValue(v); err != nil {
			return nil, &ArgumentError{Tool: name, Err: err}
		}
	}
	return args, nil
}

// toResult converts a tool function's output into a result; see [New].
func toResult(name string, out any) (*Result, error) {
	switch v := out.(type) {
	case nil:
		return &Result{}, nil
	case string:
		return TextResult(v), nil
	case *Result:
		if v == nil {
			return &Result{}, nil
		}
		return v, nil
	case Result:
		return &v, nil
	case model.Part:
		return &Result{Parts: []model.Part{v}}, nil
	case []model.Part:
		return &Result{Parts: v}, nil
	}
	rv := reflect.ValueOf(out)
	switch {
	case rv.Kind() == reflect.Pointer && rv.IsNil():
		return &Result{}, nil
	case rv.Kind() == reflect.Struct && rv.NumField() == 0:
		return &Result{}, nil
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("tool %s: encoding the result: %w", name, err)
	}
	if string(b) == "null" {
		return &Result{}, nil
	}
	return &Result{Parts: []model.Part{model.TextPart(string(b))}, Structured: b}, nil
}
