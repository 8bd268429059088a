package tool_test

import (
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/calf-go/calf/tool"
)

type Mood string

type Page[T any] struct {
	Items []T `json:"items"`
}

func TestSchemaForString(t *testing.T) {
	if s, err := tool.SchemaFor[string](); s != nil || err != nil {
		t.Errorf("SchemaFor[string]() = %v, %v; want nil, nil", s, err)
	}
	if s, err := tool.SchemaFor[Mood](); s != nil || err != nil {
		t.Errorf("SchemaFor[Mood]() = %v, %v; want nil, nil", s, err)
	}
}

// schemaCase checks SchemaFor for one type.
type schemaCase struct {
	name        string
	schema      func() (*tool.Schema, error)
	wantWrapped bool
	wantName    string
	wantJSON    string
	valid       []string
	// invalid maps invalid values to text their error must contain.
	invalid map[string]string
	// unwrap maps valid values to what Unwrap returns.
	unwrap map[string]string
}

func TestSchemaFor(t *testing.T) {
	tests := []schemaCase{
		{
			name:     "struct",
			schema:   tool.SchemaFor[Report],
			wantName: "Report",
			wantJSON: `{"type":"object","properties":{"title":{"type":"string"},"score":{"type":"integer"}},"required":["title","score"],"additionalProperties":false}`,
			valid:    []string{`{"title":"a","score":1}`},
			invalid: map[string]string{
				`{"title":"a"}`:                    `missing properties: ["score"]`,
				`{"title":"a","score":"x"}`:        `property "score"`,
				`{"title":"a","score":1,"more":1}`: `unexpected additional properties ["more"]`,
				`[]`:                               `want "object"`,
				`{"title":`:                        "not valid JSON",
			},
			unwrap: map[string]string{`{"title":"a","score":1}`: `{"title":"a","score":1}`},
		},
		{
			name:     "pointer to struct",
			schema:   tool.SchemaFor[*Report],
			wantName: "Report",
			wantJSON: `{"type":"object","properties":{"title":{"type":"string"},"score":{"type":"integer"}},"required":["title","score"],"additionalProperties":false}`,
			valid:    []string{`{"title":"a","score":1}`},
			invalid:  map[string]string{`null`: `want "object"`},
		},
		{
			name:        "slice",
			schema:      tool.SchemaFor[[]int],
			wantWrapped: true,
			wantName:    "output",
			wantJSON:    `{"type":"object","properties":{"output":{"type":["null","array"],"items":{"type":"integer"}}},"required":["output"],"additionalProperties":false}`,
			valid:       []string{`{"output":[1,2]}`, `{"output":[]}`},
			invalid: map[string]string{
				`[1,2]`:               `want "object"`,
				`{"output":["a"]}`:    `property "output[]"`,
				`{}`:                  `missing properties: ["output"]`,
				`{"output":[],"x":1}`: `["x"]`,
			},
			unwrap: map[string]string{`{"output":[1,2]}`: `[1,2]`},
		},
		{
			name:        "int",
			schema:      tool.SchemaFor[int],
			wantWrapped: true,
			wantName:    "output",
			wantJSON:    `{"type":"object","properties":{"output":{"type":"integer"}},"required":["output"],"additionalProperties":false}`,
			valid:       []string{`{"output":7}`},
			invalid:     map[string]string{`{"output":7.5}`: `property "output"`},
			unwrap:      map[string]string{`{"output": 7}`: `7`},
		},
		{
			name:        "generic struct in a slice",
			schema:      tool.SchemaFor[[]Page[Report]],
			wantWrapped: true,
			wantName:    "output",
			valid:       []string{`{"output":[{"items":[{"title":"a","score":1}]}]}`},
			invalid:     map[string]string{`{"output":[{"items":[{"title":1,"score":1}]}]}`: `property "output[].items[].title"`},
		},
		{
			name:     "generic struct",
			schema:   tool.SchemaFor[Page[int]],
			wantName: "Page_int",
			valid:    []string{`{"items":[1]}`},
		},
		{
			name:     "map",
			schema:   tool.SchemaFor[map[string]float64],
			wantName: "output",
			wantJSON: `{"type":"object","properties":{},"additionalProperties":{"type":"number"}}`,
			valid:    []string{`{"a":1.5}`, `{}`},
			invalid:  map[string]string{`{"a":"x"}`: `property "*"`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := tt.schema()
			if err != nil {
				t.Fatal(err)
			}
			if s.Wrapped() != tt.wantWrapped {
				t.Errorf("Wrapped() = %v, want %v", s.Wrapped(), tt.wantWrapped)
			}
			if s.Name() != tt.wantName {
				t.Errorf("Name() = %q, want %q", s.Name(), tt.wantName)
			}
			if tt.wantJSON != "" && string(s.JSON()) != tt.wantJSON {
				t.Errorf("JSON() =\n%s\nwant\n%s", s.JSON(), tt.wantJSON)
			}
			for _, v := range tt.valid {
				if err := s.Validate(json.RawMessage(v)); err != nil {
					t.Errorf("Validate(%s) = %v", v, err)
				}
			}
			for v, want := range tt.invalid {
				err := s.Validate(json.RawMessage(v))
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("Validate(%s) = %v, want an error containing %q", v, err, want)
				}
			}
			for v, want := range tt.unwrap {
				got, err := s.Unwrap(json.RawMessage(v))
				if err != nil || string(got) != want {
					t.Errorf("Unwrap(%s) = %s, %v; want %s", v, got, err, want)
				}
			}
		})
	}
}

func TestSchemaValidationError(t *testing.T) {
	s, err := tool.SchemaFor[[]Report]()
	if err != nil {
		t.Fatal(err)
	}
	err = s.Validate(json.RawMessage(`{"output":[{"title":"a","score":true}]}`))
	var ve *tool.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("Validate = %v, want a *ValidationError", err)
	}
	if ve.Path != "output[].score" {
		t.Errorf("Path = %q, want output[].score", ve.Path)
	}
	if want := `type: true has type "boolean", want "integer"`; ve.Reason != want {
		t.Errorf("Reason = %q, want %q", ve.Reason, want)
	}
	if errors.Unwrap(err) == nil {
		t.Error("the validation error does not wrap the validator's error")
	}
	err = s.Validate(json.RawMessage(`{"output":`))
	if err == nil || errors.As(err, &ve) {
		t.Errorf("Validate(malformed) = %v, want an error that is not a *ValidationError", err)
	}
}

func TestSchemaUnwrapErrors(t *testing.T) {
	s, err := tool.SchemaFor[[]int]()
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{`[1]`, `{}`, `{"out":[1]}`, `nope`} {
		if got, err := s.Unwrap(json.RawMessage(v)); err == nil {
			t.Errorf("Unwrap(%s) = %s, want an error", v, got)
		}
	}
}

func TestSchemaForErrors(t *testing.T) {
	type Node struct {
		Next *Node `json:"next,omitempty"`
	}
	_, err := tool.SchemaFor[Node]()
	if !errors.Is(err, tool.ErrRecursiveType) {
		t.Errorf("SchemaFor[Node]() error = %v, want ErrRecursiveType", err)
	}
	_, err = tool.SchemaFor[func()]()
	if !errors.Is(err, tool.ErrUnsupportedType) {
		t.Errorf("SchemaFor[func()]() error = %v, want ErrUnsupportedType", err)
	}
	// The cached error is returned again.
	_, err2 := tool.SchemaFor[func()]()
	if err2 == nil || err2.Error() != err.Error() {
		t.Errorf("second SchemaFor[func()]() error = %v, want %v", err2, err)
	}
}

func TestSchemaForCaches(t *testing.T) {
	type Fresh struct {
		A int `json:"a"`
	}
	var wg sync.WaitGroup
	got := make([]*tool.Schema, 8)
	for i := range got {
		wg.Go(func() {
			s, err := tool.SchemaFor[Fresh]()
			if err != nil {
				t.Error(err)
			}
			got[i] = s
		})
	}
	wg.Wait()
	for i, s := range got {
		if s != got[0] {
			t.Errorf("call %d returned a different schema than call 0", i)
		}
	}
	j := got[0].JSON()
	j[0] = 'x'
	if got[0].JSON()[0] != '{' {
		t.Error("modifying JSON()'s result changed the schema")
	}
}

func TestParseSchema(t *testing.T) {
	s, err := tool.ParseSchema(json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer","minimum":1}},"required":["n"]}`))
	if err != nil {
		t.Fatal(err)
	}
	if s.Wrapped() {
		t.Error("a parsed schema is wrapped")
	}
	if err := s.Validate(json.RawMessage(`{"n":0}`)); err == nil || !strings.Contains(err.Error(), `property "n": minimum`) {
		t.Errorf("Validate({n:0}) = %v", err)
	}
	for _, bad := range []string{`{"type":5}`, `nope`, `{"$ref":"http://example.com/s.json"}`} {
		if _, err := tool.ParseSchema(json.RawMessage(bad)); !errors.Is(err, tool.ErrInvalidSchema) {
			t.Errorf("ParseSchema(%s) error = %v, want ErrInvalidSchema", bad, err)
		}
	}
}

func TestSchemaEnumTags(t *testing.T) {
	type Args struct {
		Level  uint8    `json:"level" enum:"1, 2,3"`
		Ratio  float64  `json:"ratio,omitempty" enum:"0.5,1.5"`
		On     bool     `json:"on,omitempty" enum:"true"`
		Colors []string `json:"colors,omitempty" enum:"red,green"`
	}
	s, err := tool.SchemaFor[Args]()
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Properties map[string]struct {
			Enum  []any `json:"enum"`
			Items struct {
				Enum []any `json:"enum"`
			} `json:"items"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(s.JSON(), &got); err != nil {
		t.Fatal(err)
	}
	enums := map[string][]any{
		"level":  got.Properties["level"].Enum,
		"ratio":  got.Properties["ratio"].Enum,
		"on":     got.Properties["on"].Enum,
		"colors": got.Properties["colors"].Items.Enum,
	}
	want := map[string][]any{
		"level":  {1.0, 2.0, 3.0},
		"ratio":  {0.5, 1.5},
		"on":     {true},
		"colors": {"red", "green"},
	}
	if diff := cmp.Diff(want, enums); diff != "" {
		t.Errorf("enums (-want +got):\n%s", diff)
	}
	if err := s.Validate(json.RawMessage(`{"level":2,"ratio":1.5,"on":true,"colors":["red"]}`)); err != nil {
		t.Error(err)
	}
	if err := s.Validate(json.RawMessage(`{"level":4}`)); err == nil {
		t.Error("a value outside the enum was accepted")
	}
}

func BenchmarkSchemaFor(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tool.SchemaFor[Report](); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSchemaValidate(b *testing.B) {
	s, err := tool.SchemaFor[[]Report]()
	if err != nil {
		b.Fatal(err)
	}
	data := json.RawMessage(`{"output":[{"title":"a","score":1},{"title":"b","score":2}]}`)
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Validate(data); err != nil {
			b.Fatal(err)
		}
	}
}
