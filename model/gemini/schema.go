package gemini

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// ErrUnsupportedSchema is matched by every *[SchemaError].
var ErrUnsupportedSchema = errors.New("gemini: schema cannot be expressed in Gemini's schema dialect")

// SchemaError says which keyword of a JSON Schema Gemini's schema dialect
// (a subset of OpenAPI 3.0's) cannot express, and why. It matches
// [ErrUnsupportedSchema].
type SchemaError struct {
	// Pointer is the JSON pointer (RFC 6901) of the offending keyword in
	// the schema, such as "/properties/tags/additionalProperties"; empty
	// for the schema itself.
	Pointer string
	// Reason says what cannot be expressed.
	Reason string
}

// Error says which keyword cannot be expressed, and why.
func (e *SchemaError) Error() string {
	if e.Pointer == "" {
		return "gemini: schema: " + e.Reason
	}
	return "gemini: schema keyword " + e.Pointer + ": " + e.Reason
}

// Is reports whether target is [ErrUnsupportedSchema].
func (e *SchemaError) Is(target error) bool { return target == ErrUnsupportedSchema }

// CheckSchema reports whether Gemini's schema dialect can express the JSON
// Schema s, as the parameters of a tool or as the output schema: nil when
// it can, or a *[SchemaError] naming the JSON pointer of the first keyword
// it cannot (see the package documentation for what translates). It
// implements [model.SchemaChecker], so agent.New and Agent.AddTool refuse
// such a tool or output type when the agent is built.
func (m *Model) CheckSchema(s json.RawMessage) error {
	_, err := translateSchema(s, false)
	return err
}

// maxSchemaDepth bounds the nesting of a schema (and of the references it
// expands).
const maxSchemaDepth = 64

// schema is a schema in Gemini's dialect, as the API takes it.
type schema struct {
	Type             string     `json:"type,omitempty"`
	Format           string     `json:"format,omitempty"`
	Title            string     `json:"title,omitempty"`
	Description      string     `json:"description,omitempty"`
	Nullable         bool       `json:"nullable,omitempty"`
	Enum             []string   `json:"enum,omitempty"`
	Items            *schema    `json:"items,omitempty"`
	MinItems         *int64     `json:"minItems,omitempty"`
	MaxItems         *int64     `json:"maxItems,omitempty"`
	Properties       properties `json:"properties,omitempty"`
	Required         []string   `json:"required,omitempty"`
	PropertyOrdering []string   `json:"propertyOrdering,omitempty"`
	MinProperties    *int64     `json:"minProperties,omitempty"`
	MaxProperties    *int64     `json:"maxProperties,omitempty"`
	Minimum          *float64   `json:"minimum,omitempty"`
	Maximum          *float64   `json:"maximum,omitempty"`
	MinLength        *int64     `json:"minLength,omitempty"`
	MaxLength        *int64     `json:"maxLength,omitempty"`
	Pattern          string     `json:"pattern,omitempty"`
	AnyOf            []*schema  `json:"anyOf,omitempty"`
	// typed says the schema has a type (given or inferred), nullOnly that
	// it allows null only ({"type": "null"}).
	typed, nullOnly bool
}

// property is one property of an object schema.
type property struct {
	name string
	s    *schema
}

// properties keeps an object's properties in the order the source gave
// them, which is the order the model is asked to write them in.
type properties []property

// MarshalJSON writes the properties as an object, in order.
func (ps properties) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, p := range ps {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(p.name)
		b.Write(k)
		b.WriteByte(':')
		v, err := json.Marshal(p.s)
		if err != nil {
			return nil, err
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func (ps properties) get(name string) *schema {
	for _, p := range ps {
		if p.name == name {
			return p.s
		}
	}
	return nil
}

// schemaCache keeps translations of the schemas requests carry (the same
// tools on every call), up to maxCachedSchemas of them.
var (
	schemaCache      sync.Map // cacheKey -> cachedSchema
	cachedSchemas    atomic.Int64
	maxCachedSchemas int64 = 1024
)

type cacheKey struct {
	schema string
	output bool
}

type cachedSchema struct {
	raw json.RawMessage
	err error
}

// translateSchema translates the JSON Schema src into Gemini's dialect and
// returns it as JSON: nil for an empty schema, and, for tool parameters
// (output false), for an object without properties, which the API refuses
// as parameters. output marks the response schema, whose objects also get
// a propertyOrdering.
func translateSchema(src json.RawMessage, output bool) (json.RawMessage, error) {
	src = bytes.TrimSpace(src)
	if len(src) == 0 || string(src) == "null" {
		return nil, nil
	}
	key := cacheKey{string(src), output}
	if v, ok := schemaCache.Load(key); ok {
		c := v.(cachedSchema)
		return c.raw, c.err
	}
	raw, err := translateUncached(src, output)
	if cachedSchemas.Load() < maxCachedSchemas {
		if _, loaded := schemaCache.LoadOrStore(key, cachedSchema{raw, err}); !loaded {
			cachedSchemas.Add(1)
		}
	}
	return raw, err
}

func translateUncached(src json.RawMessage, output bool) (json.RawMessage, error) {
	if !json.Valid(src) {
		return nil, &SchemaError{Reason: "the schema is not valid JSON"}
	}
	t := &translator{root: src, output: output}
	s, err := t.translate(src, "")
	if err != nil {
		return nil, err
	}
	if s.Type == "OBJECT" && len(s.Properties) == 0 && len(s.AnyOf) == 0 {
		// A function without parameters, or an output object with no
		// properties: the API takes no empty OBJECT there.
		return nil, nil
	}
	return json.Marshal(s)
}

// translator translates one schema document.
type translator struct {
	root   json.RawMessage
	output bool
	refs   []string // the references being expanded, outermost first
	depth  int
}

func (t *translator) errf(ptr, format string, args ...any) error {
	return &SchemaError{Pointer: ptr, Reason: fmt.Sprintf(format, args...)}
}

// Keywords that carry no constraint, which the translation drops.
var annotations = map[string]bool{
	"$schema": true, "$id": true, "$comment": true, "$anchor": true, "$dynamicAnchor": true,
	"$vocabulary": true, "$defs": true, "definitions": true, "default": true, "examples": true,
	"example": true, "readOnly": true, "writeOnly": true, "deprecated": true,
	"contentEncoding": true, "contentMediaType": true, "contentSchema": true,
}

// Keywords that constrain values in ways Gemini's schema cannot say.
var unsupported = map[string]string{
	"const":             "const is not supported (Gemini's enum takes strings; write the value in the description)",
	"patternProperties": "patternProperties is not supported: Gemini's objects have named properties only",
	"propertyNames":     "propertyNames is not supported: Gemini's objects have named properties only",
	"dependentRequired": "dependentRequired is not supported",
	"dependentSchemas":  "dependentSchemas is not supported",
	"dependencies":      "dependencies is not supported",
	"if":                "if/then/else is not supported",
	"then":              "if/then/else is not supported",
	"else":              "if/then/else is not supported",
	"not":               "not is not supported",
	"contains":          "contains is not supported",
	"minContains":       "minContains is not supported",
	"maxContains":       "maxContains is not supported",
	"prefixItems":       "prefixItems (a tuple) is not supported: Gemini's arrays have one item schema",
	"multipleOf":        "multipleOf is not supported",
	"$dynamicRef":       "$dynamicRef is not supported",
	"$recursiveRef":     "$recursiveRef is not supported",
}

// Formats the API knows, by type; others are dropped (a format is an
// annotation in JSON Schema).
var formats = map[string][]string{
	"STRING":  {"date-time", "enum"},
	"NUMBER":  {"float", "double"},
	"INTEGER": {"int32", "int64"},
}

// pointer returns ptr extended by the reference tokens toks.
func pointer(ptr string, toks ...string) string {
	for _, tok := range toks {
		tok = strings.ReplaceAll(tok, "~", "~0")
		tok = strings.ReplaceAll(tok, "/", "~1")
		ptr += "/" + tok
	}
	return ptr
}

// translate translates the schema raw found at ptr.
func (t *translator) translate(raw json.RawMessage, ptr string) (*schema, error) {
	return t.translateIn(raw, ptr, false)
}

// translateIn translates the schema raw found at ptr; part marks a part
// of a schema (a branch of allOf, the keywords beside a $ref), which may
// leave the type to the rest.
func (t *translator) translateIn(raw json.RawMessage, ptr string, part bool) (*schema, error) {
	t.depth++
	defer func() { t.depth-- }()
	if t.depth > maxSchemaDepth {
		return nil, t.errf(ptr, "the schema is nested more than %d levels deep", maxSchemaDepth)
	}
	raw = bytes.TrimSpace(raw)
	switch string(raw) {
	case "true":
		return nil, t.errf(ptr, "the schema true (any value) cannot be expressed: Gemini's schema needs a type")
	case "false":
		return nil, t.errf(ptr, "the schema false (no value) cannot be expressed")
	}
	obj, err := parseObject(raw)
	if err != nil {
		return nil, t.errf(ptr, "a schema must be a JSON object or a boolean")
	}
	if ref, ok := obj.vals["$ref"]; ok {
		return t.ref(obj, ref, ptr, part)
	}
	s := &schema{}
	for _, k := range obj.keys {
		if err := t.keyword(s, k, obj.vals[k], pointer(ptr, k)); err != nil {
			return nil, err
		}
	}
	if err := t.exclusive(s, obj, ptr); err != nil {
		return nil, err
	}
	if v, ok := obj.vals["allOf"]; ok {
		if err := t.allOf(s, v, pointer(ptr, "allOf")); err != nil {
			return nil, err
		}
	}
	_, hasAnyOf := obj.vals["anyOf"]
	_, hasOneOf := obj.vals["oneOf"]
	if hasAnyOf && hasOneOf {
		return nil, t.errf(pointer(ptr, "oneOf"), "anyOf and oneOf together are not supported")
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		if v, ok := obj.vals[k]; ok {
			if err := t.anyOf(s, v, pointer(ptr, k), k == "oneOf"); err != nil {
				return nil, err
			}
		}
	}
	return t.finish(s, ptr, part)
}

// keyword translates the keyword k, whose value is v, into s.
func (t *translator) keyword(s *schema, k string, v json.RawMessage, kp string) error {
	if reason, ok := unsupported[k]; ok {
		return t.errf(kp, "%s", reason)
	}
	var err error
	switch k {
	case "type":
		return t.types(s, v, kp)
	case "nullable":
		var b bool
		if json.Unmarshal(v, &b) != nil {
			return t.errf(kp, "nullable must be a boolean")
		}
		s.Nullable = s.Nullable || b
	case "title", "description", "pattern", "format":
		var str string
		if json.Unmarshal(v, &str) != nil {
			return t.errf(kp, "%s must be a string", k)
		}
		switch k {
		case "title":
			s.Title = str
		case "description":
			s.Description = str
		case "pattern":
			s.Pattern = str
		default:
			s.Format = str
		}
	case "enum":
		return t.enum(s, v, kp)
	case "properties":
		return t.properties(s, v, kp)
	case "required":
		if json.Unmarshal(v, &s.Required) != nil {
			return t.errf(kp, "required must be a list of strings")
		}
	case "additionalProperties", "unevaluatedProperties":
		// false (or {"not": {}}) says what Gemini's objects do anyway:
		// no properties but the named ones; true or {} loosens nothing
		// the model will use.
		if !allowsAnything(v) && !allowsNothing(v) {
			return t.errf(kp, "%s with a schema (a map) is not supported: Gemini's objects have named properties only", k)
		}
	case "items":
		if bytes.HasPrefix(bytes.TrimSpace(v), []byte("[")) {
			return t.errf(kp, "items as a list (a tuple) is not supported: Gemini's arrays have one item schema")
		}
		if s.Items, err = t.translate(v, kp); err != nil {
			return err
		}
	case "additionalItems", "unevaluatedItems":
		if !allowsAnything(v) {
			return t.errf(kp, "%s is not supported", k)
		}
	case "uniqueItems":
		var b bool
		if json.Unmarshal(v, &b) != nil || b {
			return t.errf(kp, "uniqueItems is not supported")
		}
	case "minItems", "maxItems", "minLength", "maxLength", "minProperties", "maxProperties":
		n, err := count(v)
		if err != nil {
			return t.errf(kp, "%s must be a non-negative integer", k)
		}
		*s.countField(k) = &n
	case "minimum", "maximum":
		var f float64
		if json.Unmarshal(v, &f) != nil {
			return t.errf(kp, "%s must be a number", k)
		}
		if k == "minimum" {
			s.Minimum = tighter(s.Minimum, f, math.Max)
		} else {
			s.Maximum = tighter(s.Maximum, f, math.Min)
		}
	default:
		// exclusiveMinimum, exclusiveMaximum, allOf, anyOf and oneOf are
		// handled once the schema's own keywords are known; the rest are
		// annotations, or keywords JSON Schema does not define (such as
		// "x-..."), which constrain nothing.
	}
	return nil
}

// finish infers a missing type, checks the keywords against the type, and
// completes the schema. A part (see translateIn) may stay without a type.
func (t *translator) finish(s *schema, ptr string, part bool) (*schema, error) {
	if part {
		return s, nil
	}
	if !s.typed && len(s.AnyOf) == 0 && !s.nullOnly {
		switch {
		case len(s.Properties) > 0 || len(s.Required) > 0 || s.MinProperties != nil || s.MaxProperties != nil:
			s.Type, s.typed = "OBJECT", true
		case s.Items != nil || s.MinItems != nil || s.MaxItems != nil:
			s.Type, s.typed = "ARRAY", true
		case len(s.Enum) > 0 || s.Pattern != "" || s.MinLength != nil || s.MaxLength != nil:
			s.Type, s.typed = "STRING", true
		case s.Minimum != nil || s.Maximum != nil:
			s.Type, s.typed = "NUMBER", true
		default:
			return nil, t.errf(ptr, "the schema has no type (it allows any value), which Gemini's schema cannot express")
		}
	}
	if s.nullOnly && !s.typed && len(s.AnyOf) == 0 {
		return nil, t.errf(ptr, "a schema that allows only null cannot be expressed")
	}
	if len(s.Enum) > 0 && s.Type != "STRING" {
		return nil, t.errf(pointer(ptr, "enum"), "an enum of %s values is not supported: Gemini's enum takes strings only", strings.ToLower(s.Type))
	}
	if s.Format != "" && !slices.Contains(formats[s.Type], s.Format) {
		s.Format = ""
	}
	if s.Type == "OBJECT" {
		for _, r := range s.Required {
			if s.Properties.get(r) == nil {
				return nil, t.errf(pointer(ptr, "required"), "required names %q, which properties does not define", r)
			}
		}
	}
	s.PropertyOrdering = nil
	if t.output && s.Type == "OBJECT" && len(s.Properties) > 1 {
		s.PropertyOrdering = make([]string, len(s.Properties))
		for i, p := range s.Properties {
			s.PropertyOrdering[i] = p.name
		}
	}
	return s, nil
}

func (s *schema) countField(k string) **int64 {
	switch k {
	case "minItems":
		return &s.MinItems
	case "maxItems":
		return &s.MaxItems
	case "minLength":
		return &s.MinLength
	case "maxLength":
		return &s.MaxLength
	case "minProperties":
		return &s.MinProperties
	default:
		return &s.MaxProperties
	}
}

// types sets the type of s from the type keyword v.
func (t *translator) types(s *schema, v json.RawMessage, ptr string) error {
	var names []string
	var one string
	if json.Unmarshal(v, &one) == nil {
		names = []string{one}
	} else if json.Unmarshal(v, &names) != nil || len(names) == 0 {
		return t.errf(ptr, "type must be a type name or a list of them")
	}
	var kept []string
	for _, n := range names {
		if n == "null" {
			s.Nullable = true
			continue
		}
		kept = append(kept, n)
	}
	switch len(kept) {
	case 0:
		s.nullOnly = true
		return nil
	case 1:
	default:
		return t.errf(ptr, "a list of several types (%s) is not supported: Gemini's schema takes one type; use anyOf", strings.Join(kept, ", "))
	}
	switch kept[0] {
	case "string", "number", "integer", "boolean", "array", "object":
		s.Type, s.typed = strings.ToUpper(kept[0]), true
		return nil
	}
	return t.errf(ptr, "unknown type %q", kept[0])
}

// enum sets the enum of s from the enum keyword v: strings, and null,
// which makes s nullable.
func (t *translator) enum(s *schema, v json.RawMessage, ptr string) error {
	var vals []json.RawMessage
	if json.Unmarshal(v, &vals) != nil || len(vals) == 0 {
		return t.errf(ptr, "enum must be a non-empty list")
	}
	for _, val := range vals {
		if string(bytes.TrimSpace(val)) == "null" {
			s.Nullable = true
			continue
		}
		var str string
		if json.Unmarshal(val, &str) != nil {
			return t.errf(ptr, "an enum of values other than strings (%s) is not supported: Gemini's enum takes strings only", val)
		}
		s.Enum = append(s.Enum, str)
	}
	return nil
}

// properties translates the properties keyword v, in order.
func (t *translator) properties(s *schema, v json.RawMessage, ptr string) error {
	obj, err := parseObject(v)
	if err != nil {
		return t.errf(ptr, "properties must be an object")
	}
	for _, name := range obj.keys {
		p, err := t.translate(obj.vals[name], pointer(ptr, name))
		if err != nil {
			return err
		}
		s.Properties = append(s.Properties, property{name, p})
	}
	return nil
}

// exclusive applies exclusiveMinimum and exclusiveMaximum, in their
// 2019+ (a number) or draft-4 (a boolean on minimum or maximum) forms: an
// integer's bound becomes the next integer in; a number's cannot be said.
func (t *translator) exclusive(s *schema, obj *object, ptr string) error {
	for _, k := range []string{"exclusiveMinimum", "exclusiveMaximum"} {
		v, ok := obj.vals[k]
		if !ok {
			continue
		}
		kp := pointer(ptr, k)
		lower := k == "exclusiveMinimum"
		var bound float64
		var flag bool
		if json.Unmarshal(v, &flag) == nil {
			if !flag {
				continue
			}
			b := s.Maximum
			if lower {
				b = s.Minimum
			}
			if b == nil {
				continue // draft 4: a flag without its bound means nothing
			}
			bound = *b
		} else if json.Unmarshal(v, &bound) != nil {
			return t.errf(kp, "%s must be a number", k)
		}
		if s.Type != "INTEGER" {
			return t.errf(kp, "%s on a non-integer is not supported: Gemini's minimum and maximum are inclusive", k)
		}
		if lower {
			s.Minimum = tighter(nil, math.Floor(bound)+1, math.Max)
			if m := obj.vals["minimum"]; m != nil {
				var f float64
				if json.Unmarshal(m, &f) == nil && !flag {
					s.Minimum = tighter(s.Minimum, f, math.Max)
				}
			}
		} else {
			s.Maximum = tighter(nil, math.Ceil(bound)-1, math.Min)
			if m := obj.vals["maximum"]; m != nil {
				var f float64
				if json.Unmarshal(m, &f) == nil && !flag {
					s.Maximum = tighter(s.Maximum, f, math.Min)
				}
			}
		}
	}
	return nil
}

// ref translates a schema with a $ref: the schema referred to, with the
// keywords beside the reference, which apply too.
func (t *translator) ref(obj *object, v json.RawMessage, ptr string, part bool) (*schema, error) {
	kp := pointer(ptr, "$ref")
	var ref string
	if json.Unmarshal(v, &ref) != nil {
		return nil, t.errf(kp, "$ref must be a string")
	}
	if ref != "#" && !strings.HasPrefix(ref, "#/") {
		return nil, t.errf(kp, "$ref %q is not supported: only references within the schema (#/...) are", ref)
	}
	if slices.Contains(t.refs, ref) {
		return nil, t.errf(kp, "$ref %q refers back to a schema that contains it (a recursive schema), which Gemini's schema cannot express", ref)
	}
	target, err := resolvePointer(t.root, strings.TrimPrefix(ref, "#"))
	if err != nil {
		return nil, t.errf(kp, "$ref %q: %v", ref, err)
	}
	t.refs = append(t.refs, ref)
	s, err := t.translate(target, strings.TrimPrefix(ref, "#"))
	t.refs = t.refs[:len(t.refs)-1]
	if err != nil {
		return nil, err
	}
	c := *s // the target's translation may be shared
	rest := &object{vals: map[string]json.RawMessage{}}
	for _, k := range obj.keys {
		switch {
		case k == "$ref" || annotations[k]:
		case k == "description":
			_ = json.Unmarshal(obj.vals[k], &c.Description)
		case k == "title":
			_ = json.Unmarshal(obj.vals[k], &c.Title)
		default:
			rest.keys = append(rest.keys, k)
			rest.vals[k] = obj.vals[k]
		}
	}
	if len(rest.keys) == 0 {
		return &c, nil
	}
	sib, err := t.translateIn(rest.marshal(), ptr, true)
	if err != nil {
		return nil, err
	}
	if err := merge(&c, sib); err != nil {
		return nil, t.errf(kp, "the keywords beside $ref conflict with the schema it refers to: %v", err)
	}
	return t.finish(&c, ptr, part)
}

// allOf merges the branches of allOf into s.
func (t *translator) allOf(s *schema, v json.RawMessage, ptr string) error {
	var branches []json.RawMessage
	if json.Unmarshal(v, &branches) != nil || len(branches) == 0 {
		return t.errf(ptr, "allOf must be a non-empty list")
	}
	for i, b := range branches {
		bp := pointer(ptr, strconv.Itoa(i))
		bs, err := t.translateIn(b, bp, true)
		if err != nil {
			return err
		}
		if err := merge(s, bs); err != nil {
			return t.errf(bp, "allOf cannot be flattened: %v", err)
		}
	}
	return nil
}

// anyOf translates the branches of anyOf (or oneOf) into s: a branch that
// allows only null makes s nullable; a single other branch is merged into
// s; several become s's anyOf. The branches of a oneOf must exclude each
// other by their types for anyOf to mean the same.
func (t *translator) anyOf(s *schema, v json.RawMessage, ptr string, one bool) error {
	var branches []json.RawMessage
	if json.Unmarshal(v, &branches) != nil || len(branches) == 0 {
		return t.errf(ptr, "must be a non-empty list of schemas")
	}
	var kept []*schema
	null := false
	for i, b := range branches {
		if isNullSchema(b) {
			null = true
			continue
		}
		bs, err := t.translate(b, pointer(ptr, strconv.Itoa(i)))
		if err != nil {
			return err
		}
		kept = append(kept, bs)
	}
	switch len(kept) {
	case 0:
		s.nullOnly = true
		return nil
	case 1:
		if err := merge(s, kept[0]); err != nil {
			return t.errf(ptr, "cannot be flattened: %v", err)
		}
		s.Nullable = s.Nullable || null
		return nil
	}
	if s.typed {
		return t.errf(ptr, "alternatives beside a type are not supported: give the type in each alternative")
	}
	if one {
		seen := map[string]bool{}
		for _, k := range kept {
			ty := k.Type
			if ty == "INTEGER" {
				ty = "NUMBER" // an integer is a number too
			}
			if ty == "" || seen[ty] {
				return t.errf(ptr, "oneOf whose alternatives may overlap cannot be flattened: Gemini's schema has anyOf only, which allows a value that matches several")
			}
			seen[ty] = true
		}
	}
	for i, k := range kept {
		if null && !k.Nullable {
			c := *k
			c.Nullable = true
			kept[i] = &c
		}
	}
	s.AnyOf = kept
	return nil
}

// isNullSchema reports whether raw allows null only: {"type":"null"}.
func isNullSchema(raw json.RawMessage) bool {
	obj, err := parseObject(raw)
	if err != nil {
		return false
	}
	for _, k := range obj.keys {
		if k != "type" && !annotations[k] && k != "title" && k != "description" {
			return false
		}
	}
	var ty string
	return json.Unmarshal(obj.vals["type"], &ty) == nil && ty == "null"
}

// allowsAnything reports whether the schema raw is true or {}.
func allowsAnything(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	if string(raw) == "true" {
		return true
	}
	obj, err := parseObject(raw)
	return err == nil && len(obj.keys) == 0
}

// allowsNothing reports whether the schema raw is false or {"not": {}}.
func allowsNothing(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	if string(raw) == "false" {
		return true
	}
	obj, err := parseObject(raw)
	return err == nil && len(obj.keys) == 1 && obj.vals["not"] != nil && allowsAnything(obj.vals["not"])
}

// merge adds to dst the constraints of src, both applying: it fails when
// they cannot be said as one schema.
func merge(dst, src *schema) error {
	nullable := mergeNullable(dst, src)
	switch {
	case src.Type == "":
	case dst.Type == "":
		dst.Type = src.Type
	case dst.Type+src.Type == "INTEGERNUMBER" || dst.Type+src.Type == "NUMBERINTEGER":
		dst.Type = "INTEGER" // an integer is a number
	case dst.Type != src.Type:
		return fmt.Errorf("type %s and type %s", strings.ToLower(dst.Type), strings.ToLower(src.Type))
	}
	dst.typed = dst.typed || src.typed
	dst.Nullable = nullable
	dst.nullOnly = dst.nullOnly && src.nullOnly
	if dst.Title == "" {
		dst.Title = src.Title
	}
	if dst.Description == "" {
		dst.Description = src.Description
	}
	if err := same("format", &dst.Format, src.Format); err != nil {
		return err
	}
	if err := same("pattern", &dst.Pattern, src.Pattern); err != nil {
		return err
	}
	if len(src.Enum) > 0 {
		if len(dst.Enum) > 0 && !slices.Equal(dst.Enum, src.Enum) {
			return errors.New("two different enums")
		}
		dst.Enum = src.Enum
	}
	if src.Items != nil {
		if dst.Items == nil {
			dst.Items = src.Items
		} else {
			items := *dst.Items
			if err := merge(&items, src.Items); err != nil {
				return fmt.Errorf("items: %w", err)
			}
			dst.Items = &items
		}
	}
	if len(src.Properties) > 0 {
		props := slices.Clone(dst.Properties)
		for _, p := range src.Properties {
			i := slices.IndexFunc(props, func(q property) bool { return q.name == p.name })
			if i < 0 {
				props = append(props, p)
				continue
			}
			c := *props[i].s
			if err := merge(&c, p.s); err != nil {
				return fmt.Errorf("property %q: %w", p.name, err)
			}
			props[i].s = &c
		}
		dst.Properties = props
	}
	for _, r := range src.Required {
		if !slices.Contains(dst.Required, r) {
			dst.Required = append(dst.Required, r)
		}
	}
	if len(src.AnyOf) > 0 {
		if len(dst.AnyOf) > 0 {
			return errors.New("two lists of alternatives")
		}
		dst.AnyOf = src.AnyOf
	}
	dst.MinItems = tighterInt(dst.MinItems, src.MinItems, true)
	dst.MaxItems = tighterInt(dst.MaxItems, src.MaxItems, false)
	dst.MinLength = tighterInt(dst.MinLength, src.MinLength, true)
	dst.MaxLength = tighterInt(dst.MaxLength, src.MaxLength, false)
	dst.MinProperties = tighterInt(dst.MinProperties, src.MinProperties, true)
	dst.MaxProperties = tighterInt(dst.MaxProperties, src.MaxProperties, false)
	if src.Minimum != nil {
		dst.Minimum = tighter(dst.Minimum, *src.Minimum, math.Max)
	}
	if src.Maximum != nil {
		dst.Maximum = tighter(dst.Maximum, *src.Maximum, math.Min)
	}
	return nil
}

// mergeNullable says whether the merge of dst and src allows null: when
// both have a type, only if both do; a schema without a type leaves it to
// the other.
func mergeNullable(dst, src *schema) bool {
	switch {
	case dst.typed && src.typed:
		return dst.Nullable && src.Nullable
	case dst.typed:
		return dst.Nullable
	case src.typed:
		return src.Nullable
	}
	return dst.Nullable || src.Nullable
}

func same(name string, dst *string, src string) error {
	if src == "" {
		return nil
	}
	if *dst != "" && *dst != src {
		return fmt.Errorf("%s %q and %s %q", name, *dst, name, src)
	}
	*dst = src
	return nil
}

// tighter returns the tighter of the bound b and v by pick (math.Max for a
// lower bound, math.Min for an upper one).
func tighter(b *float64, v float64, pick func(a, b float64) float64) *float64 {
	if b != nil {
		v = pick(*b, v)
	}
	return &v
}

func tighterInt(a, b *int64, lower bool) *int64 {
	switch {
	case b == nil:
		return a
	case a == nil:
		return b
	case lower == (*a > *b):
		return a
	default:
		return b
	}
}

// count reads a non-negative integer (which JSON may write as 2.0).
func count(v json.RawMessage) (int64, error) {
	var f float64
	if err := json.Unmarshal(v, &f); err != nil {
		return 0, err
	}
	if f < 0 || f != math.Trunc(f) || f > math.MaxInt32 {
		return 0, errors.New("not a count")
	}
	return int64(f), nil
}

// object is a JSON object with its keys in order.
type object struct {
	keys []string
	vals map[string]json.RawMessage
}

var errNotObject = errors.New("not a JSON object")

// parseObject parses raw, which must be a JSON object.
func parseObject(raw json.RawMessage) (*object, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return nil, errNotObject
	}
	o := &object{vals: map[string]json.RawMessage{}}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		k, ok := tok.(string)
		if !ok {
			return nil, errNotObject
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		if _, dup := o.vals[k]; !dup {
			o.keys = append(o.keys, k)
		}
		o.vals[k] = v
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	return o, nil
}

// marshal writes o back as JSON, in order.
func (o *object) marshal() json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		b.Write(kb)
		b.WriteByte(':')
		b.Write(o.vals[k])
	}
	b.WriteByte('}')
	return b.Bytes()
}

// resolvePointer returns the value at the JSON pointer ptr in doc.
func resolvePointer(doc json.RawMessage, ptr string) (json.RawMessage, error) {
	if ptr == "" {
		return doc, nil
	}
	cur := doc
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		trimmed := bytes.TrimSpace(cur)
		switch {
		case bytes.HasPrefix(trimmed, []byte("{")):
			obj, err := parseObject(cur)
			if err != nil {
				return nil, err
			}
			v, ok := obj.vals[tok]
			if !ok {
				return nil, fmt.Errorf("nothing at %s", ptr)
			}
			cur = v
		case bytes.HasPrefix(trimmed, []byte("[")):
			var list []json.RawMessage
			if err := json.Unmarshal(cur, &list); err != nil {
				return nil, err
			}
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(list) {
				return nil, fmt.Errorf("nothing at %s", ptr)
			}
			cur = list[i]
		default:
			return nil, fmt.Errorf("nothing at %s", ptr)
		}
	}
	return cur, nil
}
