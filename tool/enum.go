package tool

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// applyEnumTags walks the Go type t alongside its inferred schema js and
// sets the enum keyword of every property whose struct field has an `enum`
// tag, and the default of every property whose field has a `default` tag
// (the property is then optional). seen guards against revisiting a struct
// type.
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
		if tag, ok := f.Tag.Lookup("default"); ok {
			if err := setDefault(t, f, prop, tag); err != nil {
				return err
			}
			js.Required = slices.DeleteFunc(js.Required, func(r string) bool { return r == name })
			if len(js.Required) == 0 {
				js.Required = nil
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

// setDefault sets the default of prop, the schema of field f of struct t,
// from its default tag: the value as text for a string, a number or a
// boolean field (`default:"10"`, `default:"celsius"`), and as JSON for any
// other field (`default:"[\"a\",\"b\"]"`).
func setDefault(t reflect.Type, f reflect.StructField, prop *jsonschema.Schema, tag string) error {
	ft := f.Type
	for ft.Kind() == reflect.Pointer {
		ft = ft.Elem()
	}
	var v any
	switch ft.Kind() {
	case reflect.String, reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		var err error
		if v, err = parseEnumValue(ft, strings.TrimSpace(tag)); err != nil && ft.Kind() != reflect.String {
			return fmt.Errorf("tool: default tag of field %v.%s: %w", t, f.Name, err)
		}
		if ft.Kind() == reflect.String {
			v = tag // a string's default is the tag as it is, spaces included
		}
	default:
		// Decoded into the field's type, so that a default the field
		// cannot hold is an error now, not when a call needs it.
		pv := reflect.New(f.Type)
		if err := json.Unmarshal([]byte(tag), pv.Interface()); err != nil {
			return fmt.Errorf("tool: default tag of field %v.%s: not JSON for %v: %w", t, f.Name, f.Type, err)
		}
		if err := json.Unmarshal([]byte(tag), &v); err != nil {
			return fmt.Errorf("tool: default tag of field %v.%s: %w", t, f.Name, err)
		}
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("tool: default tag of field %v.%s: %w", t, f.Name, err)
	}
	prop.Default = raw
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
