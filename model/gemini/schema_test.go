package gemini

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/calf-go/calf/tool"
)

func TestTranslateSchema(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
		output         bool
	}{
		{"types, descriptions, bounds", `{"type":"object","title":"T","properties":{
			"s":{"type":"string","description":"a string","minLength":1,"maxLength":9,"pattern":"^a"},
			"n":{"type":"number","minimum":0,"maximum":1.5,"format":"double"},
			"i":{"type":"integer","format":"int64","exclusiveMinimum":0,"exclusiveMaximum":10},
			"b":{"type":"boolean","default":true,"examples":[true]},
			"l":{"type":"array","items":{"type":"string"},"minItems":1,"maxItems":3},
			"e":{"type":"string","format":"email"},
			"d":{"type":"string","format":"date-time"}},
			"required":["s"],"minProperties":1,"additionalProperties":false,"$schema":"https://json-schema.org/draft/2020-12/schema"}`,
			`{"type":"OBJECT","title":"T","properties":{
			"s":{"type":"STRING","description":"a string","minLength":1,"maxLength":9,"pattern":"^a"},
			"n":{"type":"NUMBER","minimum":0,"maximum":1.5,"format":"double"},
			"i":{"type":"INTEGER","format":"int64","minimum":1,"maximum":9},
			"b":{"type":"BOOLEAN"},
			"l":{"type":"ARRAY","items":{"type":"STRING"},"minItems":1,"maxItems":3},
			"e":{"type":"STRING"},
			"d":{"type":"STRING","format":"date-time"}},
			"required":["s"],"minProperties":1}`, false},
		{"nullable by type, by anyOf, by enum", `{"type":"object","properties":{
			"p":{"type":["null","string"]},
			"q":{"anyOf":[{"type":"integer"},{"type":"null"}],"description":"maybe"},
			"r":{"type":["string","null"],"enum":["x","y",null]},
			"o":{"type":"string","nullable":true}}}`,
			`{"type":"OBJECT","properties":{
			"p":{"type":"STRING","nullable":true},
			"q":{"type":"INTEGER","nullable":true,"description":"maybe"},
			"r":{"type":"STRING","nullable":true,"enum":["x","y"]},
			"o":{"type":"STRING","nullable":true}}}`, false},
		{"alternatives", `{"type":"object","properties":{
			"a":{"anyOf":[{"type":"string"},{"type":"object","properties":{"k":{"type":"integer"}}},{"type":"null"}]},
			"o":{"oneOf":[{"type":"string"},{"type":"integer"}]}}}`,
			`{"type":"OBJECT","properties":{
			"a":{"anyOf":[{"type":"STRING","nullable":true},{"type":"OBJECT","nullable":true,"properties":{"k":{"type":"INTEGER"}}}]},
			"o":{"anyOf":[{"type":"STRING"},{"type":"INTEGER"}]}}}`, false},
		{"references", `{"$defs":{"P":{"type":"object","properties":{"x":{"type":"string"}},"required":["x"]},
			"Tag":{"type":"string","enum":["a","b"]}},
			"definitions":{"Old":{"type":"integer"}},
			"type":"object","properties":{
			"p":{"$ref":"#/$defs/P","description":"the p"},
			"q":{"$ref":"#/$defs/P"},
			"tags":{"type":"array","items":{"$ref":"#/$defs/Tag"}},
			"old":{"$ref":"#/definitions/Old","minimum":3}}}`,
			`{"type":"OBJECT","properties":{
			"p":{"type":"OBJECT","description":"the p","properties":{"x":{"type":"STRING"}},"required":["x"]},
			"q":{"type":"OBJECT","properties":{"x":{"type":"STRING"}},"required":["x"]},
			"tags":{"type":"ARRAY","items":{"type":"STRING","enum":["a","b"]}},
			"old":{"type":"INTEGER","minimum":3}}}`, false},
		{"allOf flattened", `{"allOf":[
			{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]},
			{"properties":{"b":{"type":"integer","minimum":1}}},
			{"properties":{"b":{"maximum":5}},"required":["b"]}]}`,
			`{"type":"OBJECT","properties":{"a":{"type":"STRING"},"b":{"type":"INTEGER","minimum":1,"maximum":5}},"required":["a","b"]}`, false},
		{"inferred types", `{"properties":{"e":{"enum":["x"]},"l":{"items":{"type":"boolean"}},"n":{"minimum":2}}}`,
			`{"type":"OBJECT","properties":{"e":{"type":"STRING","enum":["x"]},"l":{"type":"ARRAY","items":{"type":"BOOLEAN"}},"n":{"type":"NUMBER","minimum":2}}}`, false},
		{"a wrapped output", `{"type":"object","properties":{"output":{"type":["null","array"],"items":{"type":"string"}}},"required":["output"],"additionalProperties":{"not":{}}}`,
			`{"type":"OBJECT","properties":{"output":{"type":"ARRAY","nullable":true,"items":{"type":"STRING"}}},"required":["output"]}`, true},
		{"property order kept, and asked for in an output", `{"type":"object","properties":{"zeta":{"type":"string"},"alpha":{"type":"string"}}}`,
			`{"type":"OBJECT","properties":{"zeta":{"type":"STRING"},"alpha":{"type":"STRING"}},"propertyOrdering":["zeta","alpha"]}`, true},
		{"an array output", `{"type":"array","items":{"type":"integer"}}`, `{"type":"ARRAY","items":{"type":"INTEGER"}}`, true},
		{"no parameters", `{"type":"object","properties":{}}`, ``, false},
		{"empty", ``, ``, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := translateSchema(json.RawMessage(tc.in), tc.output)
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == "" {
				if got != nil {
					t.Errorf("got %s; want none", got)
				}
				return
			}
			assertJSON(t, "schema", string(got), tc.want)
			// The properties come in the source's order.
			if tc.name == "property order kept, and asked for in an output" && !strings.Contains(string(got), `{"zeta":{"type":"STRING"},"alpha"`) {
				t.Errorf("properties reordered: %s", got)
			}
		})
	}
}

func TestSchemaErrors(t *testing.T) {
	m := testModel(t, Options{})
	for _, tc := range []struct {
		name, in, pointer, reason string
	}{
		{"a map", `{"type":"object","properties":{"m":{"type":"object","additionalProperties":{"type":"integer"}}}}`,
			"/properties/m/additionalProperties", "additionalProperties"},
		{"patternProperties", `{"type":"object","properties":{"x":{"type":"object","patternProperties":{"^a":{"type":"string"}}}}}`,
			"/properties/x/patternProperties", "patternProperties"},
		{"const", `{"type":"object","properties":{"c":{"const":"fixed"}}}`, "/properties/c/const", "const"},
		{"a pointer escaped", `{"type":"object","properties":{"a/b~c":{"type":"string","const":"x"}}}`, "/properties/a~1b~0c/const", "const"},
		{"a recursive schema", `{"$defs":{"N":{"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#/$defs/N"}}}}},"$ref":"#/$defs/N"}`,
			"/$defs/N/properties/kids/items/$ref", "recursive"},
		{"the root referred to", `{"type":"object","properties":{"self":{"$ref":"#"}}}`, "/properties/self/$ref", "recursive"},
		{"a reference elsewhere", `{"$ref":"https://example.com/schema.json"}`, "/$ref", "within the schema"},
		{"a reference to nothing", `{"type":"object","properties":{"p":{"$ref":"#/$defs/Missing"}}}`, "/properties/p/$ref", "nothing at"},
		{"oneOf overlapping", `{"type":"object","properties":{"v":{"oneOf":[{"type":"string","minLength":1},{"type":"string","maxLength":3}]}}}`,
			"/properties/v/oneOf", "oneOf"},
		{"oneOf integer and number", `{"oneOf":[{"type":"integer"},{"type":"number"}]}`, "/oneOf", "overlap"},
		{"allOf in conflict", `{"allOf":[{"type":"string"},{"type":"integer"}]}`, "/allOf/1", "type string and type integer"},
		{"any value", `{"type":"object","properties":{"any":true}}`, "/properties/any", "any value"},
		{"no type", `{"type":"object","properties":{"raw":{"description":"anything"}}}`, "/properties/raw", "no type"},
		{"an enum of integers", `{"type":"integer","enum":[1,2]}`, "/enum", "strings"},
		{"several types", `{"type":["string","integer"]}`, "/type", "several types"},
		{"a tuple", `{"type":"array","items":[{"type":"string"}]}`, "/items", "tuple"},
		{"prefixItems", `{"type":"array","prefixItems":[{"type":"string"}]}`, "/prefixItems", "tuple"},
		{"not", `{"type":"string","not":{"enum":["x"]}}`, "/not", "not"},
		{"if", `{"type":"object","if":{"properties":{"a":{"const":1}}},"then":{"required":["b"]}}`, "/if", "if"},
		{"an exclusive bound on a number", `{"type":"number","exclusiveMinimum":0}`, "/exclusiveMinimum", "inclusive"},
		{"uniqueItems", `{"type":"array","items":{"type":"string"},"uniqueItems":true}`, "/uniqueItems", "uniqueItems"},
		{"required undefined", `{"type":"object","properties":{"a":{"type":"string"}},"required":["b"]}`, "/required", `"b"`},
		{"multipleOf", `{"type":"integer","multipleOf":5}`, "/multipleOf", "multipleOf"},
		{"only null", `{"type":"object","properties":{"n":{"type":"null"}}}`, "/properties/n", "only null"},
		{"not JSON", `{"type":`, "", "not valid JSON"},
		{"not a schema", `[1]`, "", "JSON object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := m.CheckSchema(json.RawMessage(tc.in))
			var se *SchemaError
			if !errors.As(err, &se) || !errors.Is(err, ErrUnsupportedSchema) {
				t.Fatalf("err = %v; want a *SchemaError", err)
			}
			if se.Pointer != tc.pointer || !strings.Contains(se.Reason, tc.reason) {
				t.Errorf("err = %v (pointer %q); want pointer %q and a reason saying %q", err, se.Pointer, tc.pointer, tc.reason)
			}
			if tc.pointer != "" && !strings.Contains(err.Error(), tc.pointer) {
				t.Errorf("the message %q does not name %s", err, tc.pointer)
			}
		})
	}
	for _, ok := range []string{``, `null`, `{"type":"object","properties":{}}`, `{"type":"object"}`} {
		if err := m.CheckSchema(json.RawMessage(ok)); err != nil {
			t.Errorf("CheckSchema(%s) = %v", ok, err)
		}
	}
}

// The schemas tool.New infers from Go types translate, except those of
// values Gemini's schema cannot describe (maps, any, json.RawMessage).
func TestInferredSchemas(t *testing.T) {
	m := testModel(t, Options{})
	type inner struct {
		X int `json:"x"`
	}
	type args struct {
		A  int       `json:"a" jsonschema:"the a"`
		P  *string   `json:"p,omitempty"`
		S  []string  `json:"s"`
		T  time.Time `json:"t"`
		I  inner     `json:"i"`
		IP *inner    `json:"ip"`
		E  string    `json:"e" enum:"x,y"`
		F  float64   `json:"f"`
		B  []byte    `json:"b"`
		L  []inner   `json:"l"`
	}
	fine := tool.Must(tool.New("fine", "", func(context.Context, args) (int, error) { return 0, nil }))
	if err := m.CheckSchema(fine.Definition().Parameters); err != nil {
		t.Errorf("%s: %v", fine.Definition().Parameters, err)
	}
	got, err := translateSchema(fine.Definition().Parameters, false)
	if err != nil {
		t.Fatal(err)
	}
	assertJSON(t, "inferred", string(got), `{"type":"OBJECT","properties":{
		"a":{"type":"INTEGER","description":"the a"},
		"p":{"type":"STRING","nullable":true},
		"s":{"type":"ARRAY","nullable":true,"items":{"type":"STRING"}},
		"t":{"type":"STRING"},
		"i":{"type":"OBJECT","properties":{"x":{"type":"INTEGER"}},"required":["x"]},
		"ip":{"type":"OBJECT","nullable":true,"properties":{"x":{"type":"INTEGER"}},"required":["x"]},
		"e":{"type":"STRING","enum":["x","y"]},
		"f":{"type":"NUMBER"},
		"b":{"type":"STRING"},
		"l":{"type":"ARRAY","nullable":true,"items":{"type":"OBJECT","properties":{"x":{"type":"INTEGER"}},"required":["x"]}}},
		"required":["a","s","t","i","ip","e","f","b","l"]}`)

	type withMap struct {
		M map[string]int `json:"m"`
	}
	type withAny struct {
		V any `json:"v"`
	}
	type withRaw struct {
		R json.RawMessage `json:"r"`
	}
	for _, tc := range []struct {
		t       tool.Tool
		pointer string
	}{
		{tool.Must(tool.New("m", "", func(context.Context, withMap) (int, error) { return 0, nil })), "/properties/m/additionalProperties"},
		{tool.Must(tool.New("a", "", func(context.Context, withAny) (int, error) { return 0, nil })), "/properties/v"},
		{tool.Must(tool.New("r", "", func(context.Context, withRaw) (int, error) { return 0, nil })), "/properties/r"},
	} {
		var se *SchemaError
		if err := m.CheckSchema(tc.t.Definition().Parameters); !errors.As(err, &se) || se.Pointer != tc.pointer {
			t.Errorf("%s: %v; want an error at %s", tc.t.Definition().Parameters, err, tc.pointer)
		}
	}
}
