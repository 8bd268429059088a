package tool

import (
	"errors"
	"fmt"
	"strings"
)

// ValidationError reports a JSON value that does not follow its schema. Its
// message names the failing property and is written to be shown to a model.
type ValidationError struct {
	// Path locates the failing value: "" for the value itself, property
	// names joined with dots ("location.city"), "[]" for the elements of
	// an array ("tags[]") and "*" for the values of a map ("limits.*").
	Path string
	// Reason says what is wrong, such as
	// `type: 5 has type "integer", want "string"` or
	// `required: missing properties: ["city"]`.
	Reason string
	err    error
}

// Error returns the reason, after the path of the failing property when
// there is one: `property "city": type: 5 has type "integer", want "string"`.
func (e *ValidationError) Error() string {
	if e.Path == "" {
		return e.Reason
	}
	return fmt.Sprintf("property %q: %s", e.Path, e.Reason)
}

// Unwrap returns the validator's error, which locates the failure in the
// schema rather than in the value.
func (e *ValidationError) Unwrap() error { return e.err }

// ValidationErrors reports a JSON object that breaks its schema in several
// places: one *ValidationError per failing property, and those of the
// object itself (missing required properties, unknown ones), so that a
// model can correct them all in one round trip. It always holds at least
// two violations: [Schema.Validate] reports a single one as a
// *ValidationError. errors.As finds the first *ValidationError in it.
type ValidationErrors []*ValidationError

// Error lists the violations one per line, after their count:
//
//	3 problems:
//	- required: missing properties: ["rooms"]
//	- property "guest": type: 7 has type "integer", want "string"
//	- property "nights": type: two has type "string", want "integer"
func (e ValidationErrors) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d problems:", len(e))
	for _, v := range e {
		b.WriteString("\n- ")
		b.WriteString(v.Error())
	}
	return b.String()
}

// Unwrap returns the violations, for errors.Is and errors.As.
func (e ValidationErrors) Unwrap() []error {
	errs := make([]error, len(e))
	for i, v := range e {
		errs[i] = v
	}
	return errs
}

// newValidationError turns an error of the JSON Schema validator, a chain of
// "validating <schema location>: " wrappers around the reason, into a
// ValidationError whose path locates the value.
func newValidationError(err error) *ValidationError {
	var locs []string
	e := err
	for {
		rest, ok := strings.CutPrefix(e.Error(), "validating ")
		next := errors.Unwrap(e)
		if !ok || next == nil {
			break
		}
		loc, ok := strings.CutSuffix(rest, ": "+next.Error())
		if !ok {
			break
		}
		locs = append(locs, loc)
		e = next
	}
	return &ValidationError{Path: instancePath(locs), Reason: e.Error(), err: err}
}

// instancePath returns the path of the value that the last of locs
// describes; locs are the schema locations the validator went through, from
// the root in. A location that does not descend from the one before it, or
// that descends into $defs or definitions, was reached through a $ref: the
// locations after it are relative to the value that holds the reference.
// When a location cannot be translated, the last one is returned as
// [valuePath] translates it.
func instancePath(locs []string) string {
	base, anchor, prev := "", "", ""
	for i, loc := range locs {
		if !strings.HasPrefix(loc, "/") {
			loc = "" // "root" or an anonymous schema
		}
		if i > 0 {
			descends := prev == "" || loc == prev || strings.HasPrefix(loc, prev+"/")
			if !descends || intoDefs(loc[len(prev):]) {
				rel, ok := relativePath(prev[len(anchor):])
				if !ok {
					return valuePath(locs[len(locs)-1])
				}
				base, anchor = joinPath(base, rel), loc
			}
		}
		prev = loc
	}
	rel, ok := relativePath(prev[len(anchor):])
	if !ok {
		return valuePath(locs[len(locs)-1])
	}
	return joinPath(base, rel)
}

// intoDefs reports whether the JSON pointer suffix rest enters $defs or
// definitions, which validation reaches only through a $ref.
func intoDefs(rest string) bool {
	return strings.HasPrefix(rest, "/$defs/") || strings.HasPrefix(rest, "/definitions/") ||
		rest == "/$defs" || rest == "/definitions"
}

// joinPath appends the value path rel to base.
func joinPath(base, rel string) string {
	switch {
	case base == "":
		return rel
	case rel == "":
		return base
	case rel[0] == '[':
		return base + rel
	}
	return base + "." + rel
}

// valuePath turns a JSON pointer into a schema, such as
// "/properties/tags/items", into the path of the value it describes, such
// as "tags[]". A pointer it cannot translate is returned unchanged.
func valuePath(ptr string) string {
	if !strings.HasPrefix(ptr, "/") {
		return "" // "root" or an anonymous schema: the value itself
	}
	if p, ok := relativePath(ptr); ok {
		return p
	}
	return ptr
}

// relativePath translates ptr, a JSON pointer into a schema ("" for the
// schema itself), as [valuePath] does, and reports whether it could.
func relativePath(ptr string) (string, bool) {
	if ptr == "" {
		return "", true
	}
	segs := strings.Split(strings.TrimPrefix(ptr, "/"), "/")
	var b strings.Builder
	for i := 0; i < len(segs); i++ {
		switch segs[i] {
		case "properties":
			if i+1 >= len(segs) {
				return "", false
			}
			i++
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(strings.NewReplacer("~1", "/", "~0", "~").Replace(segs[i]))
		case "items":
			b.WriteString("[]")
		case "additionalProperties":
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteByte('*')
		case "prefixItems":
			if i+1 >= len(segs) {
				return "", false
			}
			i++
			b.WriteString("[" + segs[i] + "]")
		case "allOf", "anyOf", "oneOf", "dependentSchemas":
			// A subschema that applies to the same value.
			if i+1 >= len(segs) {
				return "", false
			}
			i++
		case "not", "if", "then", "else":
		default:
			return "", false
		}
	}
	return b.String(), true
}
