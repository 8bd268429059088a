package tool_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/calf-go/calf/tool"
)

type address struct {
	City string `json:"city"`
	Zip  string `json:"zip" jsonschema:"the postal code"`
}

type booking struct {
	Guest  string   `json:"guest"`
	Nights int      `json:"nights"`
	Rooms  int      `json:"rooms"`
	Tags   []string `json:"tags,omitempty"`
	Home   address  `json:"home"`
	Visit  *address `json:"visit,omitempty"`
}

// paths returns the paths of the violations err reports, and whether it is
// a single *ValidationError.
func paths(t *testing.T, err error) ([]string, bool) {
	t.Helper()
	var many tool.ValidationErrors
	if errors.As(err, &many) {
		var ps []string
		for _, v := range many {
			ps = append(ps, v.Path+": "+strings.SplitN(v.Reason, ":", 2)[0])
		}
		return ps, false
	}
	var one *tool.ValidationError
	if !errors.As(err, &one) {
		t.Fatalf("err = %v (%T), want validation errors", err, err)
	}
	return []string{one.Path + ": " + strings.SplitN(one.Reason, ":", 2)[0]}, true
}

// A value that breaks the schema in several properties gets every
// violation in one error.
func TestValidateReportsEveryViolation(t *testing.T) {
	s, err := tool.SchemaFor[booking]()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		value  string
		want   []string
		single bool
	}{
		{"three wrong types", `{"guest":1,"nights":"two","rooms":true,"home":{"city":"x","zip":"1"}}`,
			[]string{"guest: type", "nights: type", "rooms: type"}, false},
		{"missing, wrong and unknown", `{"guest":"a","nights":"two","home":{"city":"x","zip":"1"},"pets":2}`,
			[]string{": required", `: unexpected additional properties ["pets"]`, "nights: type"}, false},
		{"nested paths", `{"guest":"a","nights":1,"rooms":1,"home":{"city":2,"zip":"1"},"visit":{"city":"y","zip":3}}`,
			[]string{"home.city: type", "visit.zip: type"}, false},
		{"one violation", `{"guest":"a","nights":1,"rooms":"x","home":{"city":"x","zip":"1"}}`,
			[]string{"rooms: type"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := s.Validate(json.RawMessage(tt.value))
			got, single := paths(t, err)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("violations (-want +got):\n%s\n%v", diff, err)
			}
			if single != tt.single {
				t.Errorf("single = %v, want %v: %v", single, tt.single, err)
			}
		})
	}
	if err := s.Validate(json.RawMessage(`{"guest":"a","nights":1,"rooms":1,"home":{"city":"x","zip":"1"}}`)); err != nil {
		t.Errorf("a valid value: %v", err)
	}
}

// Hand-written schemas: references into $defs or definitions keep the
// value's path, and a schema whose parts would not mean on their own what
// they mean in it gets the validator's first violation alone.
func TestValidateEveryViolationHandWritten(t *testing.T) {
	tests := []struct {
		name   string
		schema string
		value  string
		want   []string
		single bool
	}{
		{"$defs", `{
			"type": "object",
			"$defs": {"pos": {"type": "integer", "minimum": 1}},
			"properties": {"a": {"$ref": "#/$defs/pos"}, "b": {"$ref": "#/$defs/pos"}},
			"required": ["a", "b"]
		}`, `{"a":0,"b":-1}`, []string{"a: minimum", "b: minimum"}, false},
		{"object in $defs", `{
			"type": "object",
			"$defs": {"addr": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}},
			"properties": {"home": {"$ref": "#/$defs/addr"}, "work": {"$ref": "#/$defs/addr"}},
			"additionalProperties": false
		}`, `{"home":{"city":1},"work":{},"x":1}`,
			[]string{`: unexpected additional properties ["x"]`, "home.city: type", "work: required"}, false},
		{"draft-07 definitions", `{
			"$schema": "http://json-schema.org/draft-07/schema#",
			"type": "object",
			"definitions": {"tags": {"type": "array", "items": {"type": "string"}}},
			"properties": {"a": {"$ref": "#/definitions/tags"}, "b": {"$ref": "#/definitions/tags"}}
		}`, `{"a":[1],"b":"x"}`, []string{"a[]: type", "b: type"}, false},
		{"a property checked twice", `{
			"type": "object",
			"properties": {"a": {"type": "string"}, "b": {"type": "string"}},
			"allOf": [{"properties": {"a": {"type": "string"}}}]
		}`, `{"a":1,"b":2}`, []string{"a: type", "b: type"}, false},
		// Checked alone, kid would lose the required name of the whole.
		{"a reference to the root", `{
			"type": "object",
			"properties": {"name": {"type": "string"}, "kid": {"$ref": "#"}},
			"required": ["name"]
		}`, `{"kid":{}}`, []string{"kid: required"}, true},
		{"a reference to another property", `{
			"type": "object",
			"properties": {"a": {"type": "integer"}, "b": {"$ref": "#/properties/a"}}
		}`, `{"b":"x"}`, []string{"b: type"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := tool.ParseSchema(json.RawMessage(tt.schema))
			if err != nil {
				t.Fatal(err)
			}
			err = s.Validate(json.RawMessage(tt.value))
			got, single := paths(t, err)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("violations (-want +got):\n%s\n%v", diff, err)
			}
			if single != tt.single {
				t.Errorf("single = %v, want %v: %v", single, tt.single, err)
			}
		})
	}
}

// A typed tool's arguments error lists every violation for the model.
func TestArgumentErrorListsEveryViolation(t *testing.T) {
	book := tool.Must(tool.New("book", "Book rooms.", func(_ context.Context, in booking) (string, error) { return "ok", nil }))
	_, err := book.Call(t.Context(), json.RawMessage(`{"guest":1,"nights":"two","home":{"city":"x","zip":"1"}}`))
	var ae *tool.ArgumentError
	if !errors.As(err, &ae) {
		t.Fatalf("err = %v, want an *ArgumentError", err)
	}
	for _, want := range []string{"3 problems", `property "guest"`, `property "nights"`, `missing properties: ["rooms"]`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}
