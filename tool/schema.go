package tool

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
)

// Errors of schema inference.
var (
	// ErrRecursiveType is returned when a JSON Schema is asked for a type
	// that contains itself, such as a tree node with a slice of nodes.
	// Inference cannot describe such types; give the schema explicitly.
	ErrRecursiveType = errors.New("tool: recursive type")
	// ErrUnsupportedType is returned when a type cannot be described by a
	// JSON Schema: channels, functions, complex numbers, maps whose keys are
	// not strings.
	ErrUnsupportedType = errors.New("tool: type has no JSON Schema")
	// ErrNotObject is returned when the arguments of a tool are not
	// described as a JSON object: a tool's input type must be a struct (or a
	// pointer to one, or a map with string keys).
	ErrNotObject = errors.New("tool: arguments must be a JSON object")
	// ErrInvalidSchema is returned for a hand-written schema that is not a
	// valid JSON Schema.
	ErrInvalidSchema = errors.New("tool: invalid JSON Schema")
)

// WrapperProperty is the property that holds a value whose type is not a
// JSON object in a [Schema.Wrapped] schema: such a value travels as
// {"output": value}.
const WrapperProperty = "output"

// Schema is a JSON Schema, ready to validate JSON values. A Schema is
// immutable and safe for concurrent use.
//
// Schemas inferred by [SchemaFor] for a type whose JSON form is not an
// object (a slice, a number, a boolean) are wrapped: the schema describes
// {"output": value}, because providers such as OpenAI accept only an object
// at the top level of a structured output. [Schema.Wrapped] reports it, and
// [Schema.Unwrap] extracts the value from a response.
type Schema struct {
	raw      json.RawMessage
	resolved *jsonschema.Resolved
	wrapped  bool
	name     string
	// parts, when not nil, check an object one property at a time, so
	// that Validate reports every violation, not only the first.
	parts *objectParts
	// defaults reports whether a property has a default (see
	// withDefaults).
	defaults bool
}

// objectParts are the pieces of an object schema with properties: the
// schema of each property alone, the required list alone, and the rest of
// the schema with the properties' values unconstrained.
type objectParts struct {
	props    map[string]*jsonschema.Resolved
	required *jsonschema.Resolved
	rest     *jsonschema.Resolved
}

// JSON returns the schema's JSON text. The caller may modify the returned
// slice.
func (s *Schema) JSON() json.RawMessage { return bytes.Clone(s.raw) }

// Name returns a name for the schema that providers accept as the name of a
// structured output (letters, digits, '_' and '-'): the Go type's name, or
// "output" for an unnamed or predeclared type.
func (s *Schema) Name() string { return s.name }

// Wrapped reports whether the schema describes {"output": value} for a
// value that is not itself a JSON object.
func (s *Schema) Wrapped() bool { return s.wrapped }

// Validate reports whether data is valid JSON that follows the schema. It
// returns a [*ValidationError] for a value that does not (a
// [ValidationErrors] when an object breaks the schema in several
// properties: every violation at once, so that a model can correct them
// in one round trip), and an error that says the text is not valid JSON
// otherwise. Messages are written to be shown to a model so that it can
// correct its output.
func (s *Schema) Validate(data json.RawMessage) error {
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return fmt.Errorf("not valid JSON: %w", err)
	}
	return s.validateValue(v)
}

func (s *Schema) validateValue(v any) error {
	err := s.resolved.Validate(v)
	if err == nil {
		return nil
	}
	obj, ok := v.(map[string]any)
	if s.parts == nil || !ok {
		return newValidationError(err)
	}
	var errs ValidationErrors
	add := func(ve *ValidationError) {
		// The object's own keywords (allOf, say) may check a property
		// that its own schema checks too.
		if !slices.ContainsFunc(errs, func(o *ValidationError) bool { return o.Path == ve.Path && o.Reason == ve.Reason }) {
			errs = append(errs, ve)
		}
	}
	for _, r := range []*jsonschema.Resolved{s.parts.required, s.parts.rest} {
		if r == nil {
			continue
		}
		if e := r.Validate(v); e != nil {
			add(newValidationError(e))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(obj)) {
		if r := s.parts.props[name]; r != nil {
			if e := r.Validate(map[string]any{name: obj[name]}); e != nil {
				ve := newValidationError(e)
				if !within(ve.Path, name) {
					// A path the validator's error does not show: the
					// property is what the model can act on.
					ve.Path = name
				}
				add(ve)
			}
		}
	}
	switch len(errs) {
	case 0:
		return newValidationError(err) // a violation the parts do not see
	case 1:
		return errs[0]
	}
	return errs
}

// Unwrap returns the value in data, a JSON value that follows the schema:
// the "output" property of a wrapped schema, or data itself otherwise.
func (s *Schema) Unwrap(data json.RawMessage) (json.RawMessage, error) {
	if !s.wrapped {
		return data, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil {
		return nil, fmt.Errorf("not a JSON object with an %q property: %w", WrapperProperty, err)
	}
	v, ok := obj[WrapperProperty]
	if !ok {
		return nil, fmt.Errorf("missing the %q property", WrapperProperty)
	}
	return v, nil
}

// ParseSchema returns the schema whose JSON text is raw. It returns an
// error matching [ErrInvalidSchema] when raw is not a JSON Schema that can
// be used for validation (a draft 2020-12 or draft-07 schema without remote
// references).
func ParseSchema(raw json.RawMessage) (*Schema, error) {
	var js jsonschema.Schema
	if err := json.Unmarshal(raw, &js); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidSchema, err)
	}
	return compile(&js, false, "")
}

// SchemaFor returns the JSON Schema of T's JSON form, for asking a model
// for structured output of type T.
//
// For a T whose kind is string, SchemaFor returns nil and no error: such an
// output is the model's plain text and needs no schema. A T whose JSON form
// is not an object (a slice, a number, a boolean) gets a wrapped schema; see
// [Schema].
//
// The schema is inferred as for a tool's arguments (see [New]) and cached
// per type, so calling SchemaFor repeatedly is cheap.
func SchemaFor[T any]() (*Schema, error) {
	return schemaForType(reflect.TypeFor[T]())
}

type cachedSchema struct {
	s   *Schema
	err error
}

var schemaCache sync.Map // reflect.Type -> cachedSchema

func schemaForType(t reflect.Type) (*Schema, error) {
	if t.Kind() == reflect.String {
		return nil, nil
	}
	if v, ok := schemaCache.Load(t); ok {
		c := v.(cachedSchema)
		return c.s, c.err
	}
	s, err := buildSchemaFor(t)
	v, _ := schemaCache.LoadOrStore(t, cachedSchema{s, err})
	c := v.(cachedSchema)
	return c.s, c.err
}

func buildSchemaFor(t reflect.Type) (*Schema, error) {
	js, err := inferSchema(t, nil)
	if err != nil {
		return nil, err
	}
	name := schemaName(t)
	if asObject(js) {
		return compile(js, false, name)
	}
	wrapper := &jsonschema.Schema{
		Type:                 "object",
		Properties:           map[string]*jsonschema.Schema{WrapperProperty: js},
		Required:             []string{WrapperProperty},
		AdditionalProperties: &jsonschema.Schema{Not: &jsonschema.Schema{}},
	}
	return compile(wrapper, true, name)
}

func compile(js *jsonschema.Schema, wrapped bool, name string) (*Schema, error) {
	raw, err := json.Marshal(js)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidSchema, err)
	}
	resolved, err := js.Resolve(nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidSchema, err)
	}
	if name == "" {
		name = WrapperProperty
	}
	return &Schema{raw: raw, resolved: resolved, wrapped: wrapped, name: name, parts: splitObject(raw),
		defaults: bytes.Contains(raw, []byte(`"default"`))}, nil
}

// withDefaults sets, in v, each property that is missing and has a default
// in the schema to its default, in the nested objects v has too (an object
// left out is not made up to hold its properties' defaults). It reports
// whether it set any.
func (s *Schema) withDefaults(v *any) (bool, error) {
	obj, ok := (*v).(map[string]any)
	if !s.defaults || !ok {
		return false, nil
	}
	return applyDefaults(obj, s.resolved.Schema())
}

func applyDefaults(obj map[string]any, js *jsonschema.Schema) (bool, error) {
	if js == nil {
		return false, nil
	}
	set := false
	for name, sub := range js.Properties {
		if sub == nil {
			continue
		}
		val, ok := obj[name]
		if !ok {
			if sub.Default != nil && !slices.Contains(js.Required, name) {
				var d any
				if err := json.Unmarshal(sub.Default, &d); err != nil {
					return set, fmt.Errorf("default of %s: %w", name, err)
				}
				obj[name], set = d, true
			}
			continue
		}
		switch val := val.(type) {
		case map[string]any:
			s, err := applyDefaults(val, sub)
			if err != nil {
				return set, err
			}
			set = set || s
		case []any:
			for _, e := range val {
				if m, ok := e.(map[string]any); ok {
					s, err := applyDefaults(m, sub.Items)
					if err != nil {
						return set, err
					}
					set = set || s
				}
			}
		}
	}
	return set, nil
}

// splitObject returns the parts of raw, an object schema with properties,
// or nil when raw is not one, or when a part would not mean on its own what
// it means in raw: a part that does not resolve, or a reference to
// anything but a definition in $defs or definitions (such as "#", the
// whole schema, or "#/properties/b", another property).
func splitObject(raw json.RawMessage) *objectParts {
	var root map[string]json.RawMessage
	if json.Unmarshal(raw, &root) != nil {
		return nil
	}
	var tree any
	if json.Unmarshal(raw, &tree) != nil || !onlyDefinitionRefs(tree) {
		return nil
	}
	var props map[string]json.RawMessage
	if json.Unmarshal(root["properties"], &props) != nil || len(props) == 0 {
		return nil
	}
	// Each part keeps what references and the draft need of the root.
	base := func() map[string]json.RawMessage {
		m := map[string]json.RawMessage{}
		for _, k := range []string{"$schema", "$defs", "definitions"} {
			if v, ok := root[k]; ok {
				m[k] = v
			}
		}
		return m
	}
	resolve := func(m map[string]json.RawMessage) *jsonschema.Resolved {
		data, err := json.Marshal(m)
		if err != nil {
			return nil
		}
		var js jsonschema.Schema
		if json.Unmarshal(data, &js) != nil {
			return nil
		}
		r, err := js.Resolve(nil)
		if err != nil {
			return nil
		}
		return r
	}
	p := &objectParts{props: map[string]*jsonschema.Resolved{}}
	for name, sub := range props {
		m := base()
		m["type"] = json.RawMessage(`"object"`)
		one, _ := json.Marshal(map[string]json.RawMessage{name: sub})
		m["properties"] = one
		if p.props[name] = resolve(m); p.props[name] == nil {
			return nil
		}
	}
	if req, ok := root["required"]; ok {
		m := base()
		m["required"] = req
		if p.required = resolve(m); p.required == nil {
			return nil
		}
	}
	rest := maps.Clone(root)
	delete(rest, "required")
	open := map[string]json.RawMessage{}
	for name := range props {
		open[name] = json.RawMessage(`{}`)
	}
	rest["properties"], _ = json.Marshal(open)
	if p.rest = resolve(rest); p.rest == nil {
		return nil
	}
	return p
}

// onlyDefinitionRefs reports whether every reference in the decoded
// schema v ($ref, $dynamicRef, $recursiveRef) points into the root's $defs
// or definitions, which every part of a split schema keeps.
func onlyDefinitionRefs(v any) bool {
	switch v := v.(type) {
	case map[string]any:
		for k, sub := range v {
			if ref, ok := sub.(string); ok && (k == "$ref" || k == "$dynamicRef" || k == "$recursiveRef") {
				if !strings.HasPrefix(ref, "#/$defs/") && !strings.HasPrefix(ref, "#/definitions/") {
					return false
				}
			}
			if !onlyDefinitionRefs(sub) {
				return false
			}
		}
	case []any:
		for _, sub := range v {
			if !onlyDefinitionRefs(sub) {
				return false
			}
		}
	}
	return true
}

var nameInvalidChars = regexp.MustCompile(`[^a-zA-Z0-9_-]+`)

// schemaName derives a provider-safe name from t's name.
func schemaName(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.PkgPath() == "" {
		return WrapperProperty // a predeclared or unnamed type
	}
	n := strings.Trim(nameInvalidChars.ReplaceAllString(t.Name(), "_"), "_")
	if n == "" {
		return WrapperProperty
	}
	return n[:min(len(n), 64)]
}

// asObject reports whether js describes a JSON object (or null and an
// object, as for a pointer to a struct). It then makes js a plain object
// schema with a properties keyword, which OpenAI requires.
func asObject(js *jsonschema.Schema) bool {
	switch {
	case js.Type == "object":
	case len(js.Types) == 2 && js.Types[0] == "null" && js.Types[1] == "object":
		js.Type, js.Types = "object", nil
	default:
		return false
	}
	if js.Properties == nil {
		js.Properties = map[string]*jsonschema.Schema{}
	}
	return true
}

// defaultTypeSchemas describes standard types whose JSON form is not what
// their Go structure suggests.
var defaultTypeSchemas = map[reflect.Type]*jsonschema.Schema{
	// Any JSON value.
	reflect.TypeFor[json.RawMessage](): {},
	// encoding/json writes a []byte as a base64 string.
	reflect.TypeFor[[]byte](): {Type: "string", ContentEncoding: "base64"},
}

// inferSchema infers the schema of t, with the enum struct tags applied.
func inferSchema(t reflect.Type, typeSchemas map[reflect.Type]*jsonschema.Schema) (*jsonschema.Schema, error) {
	ts := defaultTypeSchemas
	if len(typeSchemas) > 0 {
		ts = maps.Clone(defaultTypeSchemas)
		maps.Copy(ts, typeSchemas)
	}
	js, err := jsonschema.ForType(t, &jsonschema.ForOptions{TypeSchemas: ts})
	if err != nil {
		if strings.Contains(err.Error(), "cycle detected") {
			return nil, fmt.Errorf("%w: %v contains itself, directly or through its fields, "+
				"and a JSON Schema cannot be inferred for it; give the schema explicitly", ErrRecursiveType, t)
		}
		return nil, fmt.Errorf("%w: %v: %w", ErrUnsupportedType, t, err)
	}
	if err := applyEnumTags(t, js, nil); err != nil {
		return nil, err
	}
	// A default that breaks the property's own schema (a value outside its
	// enum, say) is refused now, not sent to a tool later.
	if _, err := js.Resolve(&jsonschema.ResolveOptions{ValidateDefaults: true}); err != nil {
		return nil, fmt.Errorf("%w: %v: a default does not follow its property's schema: %w", ErrInvalidSchema, t, err)
	}
	return js, nil
}

// within reports whether the value path p is the property name or inside it.
func within(p, name string) bool {
	rest, ok := strings.CutPrefix(p, name)
	return ok && (rest == "" || rest[0] == '.' || rest[0] == '[')
}
