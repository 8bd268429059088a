package tool

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// applyEnumTags walks the Go type t alongside its inferred schema js and
// sets the enum keyword of every property whose struct field has an `enum`
// tag. seen guards against revisiting a struct type.
func applyEnumTags(t reflect.Type, js *jsonschema.Schema, seen map[reflect.Type]bool) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if js == nil {
		return nil
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		return applyEnumTags(t.Elem(), js.Items, seen)
	case reflect.Map:
		return applyEnumTags(t.Elem(), js.AdditionalProperties, seen)
	case reflect.Struct:
	default:
		return nil
	}
	if seen[t] {
		return nil
	}
	if seen == nil {
		seen = map[reflect.Type]bool{}
	}
	seen[t] = true
	defer delete(seen, t)
	for _, f := range reflect.VisibleFields(t) {
		if f.Anonymous || !f.IsExported() {
			continue
		}
		name, ok := jsonFieldName(f)
		if !ok {
			continue
		}
		prop := js.Properties[name]
		if prop == nil {
			continue
		}
		if tag, ok := f.Tag.Lookup("enum"); ok {
			if err := setEnum(t, f, prop, tag); err != nil {
				return err
			}
		}
		if err := applyEnumTags(f.Type, prop, seen); err != nil {
			return err
		}
	}
	return nil
}

// jsonFieldName returns the name encoding/json gives the field, and false
// for a field it skips.
func jsonFieldName(f reflect.StructField) (string, bool) {
	tag, ok := f.Tag.Lookup("json")
	if !ok {
		return f.Name, true
	}
	name, _, found := strings.Cut(tag, ",")
	if name == "-" && !found {
		return "", false
	}
	if name == "" {
		return f.Name, true
	}
	return name, true
}

// setEnum sets the enum of prop, the schema of field f of struct t, from the
// comma-separated values of its enum tag. For a slice field the values
// constrain the elements.
func setEnum(t reflect.Type, f reflect.StructField, prop *jsonschema.Schema, tag string) error {
	ft, target := f.Type, prop
	nullable := false
	for ft.Kind() == reflect.Pointer {
		ft, nullable = ft.Elem(), true
	}
	if (ft.Kind() == reflect.Slice || ft.Kind() == reflect.Array) && target.Items != nil {
		ft, target, nullable = ft.Elem(), target.Items, false
		for ft.Kind() == reflect.Pointer {
			ft, nullable = ft.Elem(), true
		}
	}
	var values []any
	for s := range strings.SplitSeq(tag, ",") {
		s = strings.TrimSpace(s)
		v, err := parseEnumValue(ft, s)
		if err != nil {
			return fmt.Errorf("tool: enum tag of field %v.%s: %w", t, f.Name, err)
		}
		values = append(values, v)
	}
	if nullable {
		values = append(values, nil)
	}
	target.Enum = values
	return nil
}

func parseEnumValue(t reflect.Type, s string) (any, error) {
	switch t.Kind() {
	case reflect.String:
		return s, nil
	case reflect.Bool:
		return strconv.ParseBool(s)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.ParseInt(s, 10, t.Bits())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return strconv.ParseUint(s, 10, t.Bits())
	case reflect.Float32, reflect.Float64:
		return strconv.ParseFloat(s, t.Bits())
	default:
		return nil, fmt.Errorf("enum values are supported for strings, numbers and booleans, not %v", t)
	}
}
