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
// places: one *ValidationError per failing property, and one for the
// object itself (a missing required property, an unknown one), so that a
// model can correct them all in one round trip. errors.As finds the first
// *ValidationError in it.
type ValidationErrors []*ValidationError

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
// "validating <schema path>: " wrappers around the reason, into a
// ValidationError.
func newValidationError(err error) *ValidationError {
	path, e := "", err
	for {
		rest, ok := strings.CutPrefix(e.Error(), "validating ")
		if !ok {
			break
		}
		next := errors.Unwrap(e)
		if next == nil {
			break
		}
		path, _, _ = strings.Cut(rest, ": ")
		e = next
	}
	return &ValidationError{Path: valuePath(path), Reason: e.Error(), err: err}
}

// valuePath turns a JSON pointer into a schema, such as
// "/properties/tags/items", into the path of the value it describes, such
// as "tags[]". A pointer it cannot translate is returned unchanged.
func valuePath(ptr string) string {
	if !strings.HasPrefix(ptr, "/") {
		return "" // "root" or an anonymous schema: the value itself
	}
	segs := strings.Split(ptr[1:], "/")
	var b strings.Builder
	for i := 0; i < len(segs); i++ {
		switch segs[i] {
		case "properties":
			if i+1 >= len(segs) {
				return ptr
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
				return ptr
			}
			i++
			b.WriteString("[" + segs[i] + "]")
		default:
			return ptr
		}
	}
	return b.String()
}
