package tool_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/jsonschema-go/jsonschema"

	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/tool"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

type WeatherArgs struct {
	City string `json:"city" jsonschema:"the city, such as Paris"`
	Unit string `json:"unit,omitempty" enum:"celsius,fahrenheit" jsonschema:"the temperature unit"`
	Days int    `json:"days,omitempty" jsonschema:"how many days to forecast"`
}

type Location struct {
	City string `json:"city"`
	Zip  *int   `json:"zip,omitempty"`
}

type SearchArgs struct {
	Location Location       `json:"location"`
	Tags     []string       `json:"tags,omitempty"`
	Limits   map[string]int `json:"limits,omitempty"`
	Level    int8           `json:"level,omitempty"`
	Big      uint64         `json:"big,omitempty"`
	Sizes    []string       `json:"sizes,omitempty" enum:"S,M,L"`
	Priority *int           `json:"priority,omitempty" enum:"1,2,3"`
}

type OptionalArgs struct {
	Query string `json:"query,omitempty"`
}

// recorder returns a tool function that records its calls.
func recorder[In any](calls *atomic.Int64, got *In) func(context.Context, In) (string, error) {
	return func(_ context.Context, in In) (string, error) {
		calls.Add(1)
		*got = in
		return "ok", nil
	}
}

func TestCallArguments(t *testing.T) {
	tests := []struct {
		name string
		args string
		// want is the decoded input when the call succeeds.
		want SearchArgs
		// wantErr, when set, is text the *ArgumentError must contain.
		wantErr []string
	}{
		{name: "valid", args: `{"location":{"city":"Paris"},"tags":["a","b"],"limits":{"x":1}}`,
			want: SearchArgs{Location: Location{City: "Paris"}, Tags: []string{"a", "b"}, Limits: map[string]int{"x": 1}}},
		{name: "valid with nullable", args: `{"location":{"city":"Paris","zip":null},"priority":null}`,
			want: SearchArgs{Location: Location{City: "Paris"}}},
		{name: "enum in slice", args: `{"location":{"city":"a"},"sizes":["S","L"]}`,
			want: SearchArgs{Location: Location{City: "a"}, Sizes: []string{"S", "L"}}},
		{name: "missing required", args: `{"tags":[]}`,
			wantErr: []string{`required: missing properties: ["location"]`}},
		{name: "missing nested required", args: `{"location":{}}`,
			wantErr: []string{`property "location"`, `missing properties: ["city"]`}},
		{name: "wrong type", args: `{"location":{"city":5}}`,
			wantErr: []string{`property "location.city"`, `want "string"`}},
		{name: "wrong element type", args: `{"location":{"city":"a"},"tags":[1]}`,
			wantErr: []string{`property "tags[]"`, `want "string"`}},
		{name: "wrong map value type", args: `{"location":{"city":"a"},"limits":{"x":"y"}}`,
			wantErr: []string{`property "limits.*"`, `want "integer"`}},
		{name: "unknown property", args: `{"location":{"city":"a"},"country":"FR"}`,
			wantErr: []string{`unexpected additional properties ["country"]`}},
		{name: "unknown nested property", args: `{"location":{"city":"a","street":"x"}}`,
			wantErr: []string{`property "location"`, `["street"]`}},
		{name: "out of range", args: `{"location":{"city":"a"},"level":300}`,
			wantErr: []string{`property "level"`, "maximum"}},
		{name: "not an integer", args: `{"location":{"city":"a"},"level":1.5}`,
			wantErr: []string{`property "level"`, `want "integer"`}},
		{name: "enum", args: `{"location":{"city":"a"},"sizes":["XL"]}`,
			wantErr: []string{`property "sizes[]"`, "enum"}},
		{name: "enum on pointer", args: `{"location":{"city":"a"},"priority":7}`,
			wantErr: []string{`property "priority"`, "enum"}},
		{name: "does not decode", args: `{"location":{"city":"a"},"big":1e30}`,
			wantErr: []string{"arguments do not decode"}},
		{name: "malformed", args: `{"location":`,
			wantErr: []string{"arguments are not valid JSON"}},
		{name: "trailing data", args: `{"location":{"city":"a"}} x`,
			wantErr: []string{"arguments are not valid JSON"}},
		{name: "array", args: `[1]`,
			wantErr: []string{`want "object"`}},
		{name: "null", args: `null`,
			wantErr: []string{`missing properties: ["location"]`}},
		{name: "empty", args: ``,
			wantErr: []string{`missing properties: ["location"]`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls atomic.Int64
			var got SearchArgs
			search := tool.Must(tool.New("search", "Search.", recorder(&calls, &got)))
			res, err := search.Call(context.Background(), json.RawMessage(tt.args))
			if tt.wantErr != nil {
				var ae *tool.ArgumentError
				if !errors.As(err, &ae) {
					t.Fatalf("Call(%s) = %v, %v; want an *ArgumentError", tt.args, res, err)
				}
				if ae.Tool != "search" {
					t.Errorf("ArgumentError.Tool = %q, want search", ae.Tool)
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not contain %q", err, w)
					}
				}
				if n := calls.Load(); n != 0 {
					t.Errorf("the function ran %d times on bad arguments", n)
				}
				return
			}
			if err != nil {
				t.Fatalf("Call(%s): %v", tt.args, err)
			}
			if n := calls.Load(); n != 1 {
				t.Errorf("the function ran %d times, want 1", n)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("decoded input (-want +got):\n%s", diff)
			}
			if res.Text() != "ok" {
				t.Errorf("result text = %q, want ok", res.Text())
			}
		})
	}
}

func TestCallNullArguments(t *testing.T) {
	for _, args := range []string{``, `null`, ` null `, "\n", `{}`} {
		var calls atomic.Int64
		var got OptionalArgs
		tl := tool.Must(tool.New("opt", "", recorder(&calls, &got)))
		if _, err := tl.Call(context.Background(), json.RawMessage(args)); err != nil {
			t.Errorf("Call(%q): %v", args, err)
		}
		if calls.Load() != 1 {
			t.Errorf("Call(%q) did not run the function", args)
		}
	}
}

func TestCallPointerInput(t *testing.T) {
	var got *OptionalArgs
	tl := tool.Must(tool.New("ptr", "", func(_ context.Context, in *OptionalArgs) (string, error) {
		got = in
		return "", nil
	}))
	if _, err := tl.Call(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if got == nil {
		t.Fatal("the function got a nil pointer for null arguments")
	}
	if _, err := tl.Call(context.Background(), json.RawMessage(`{"query":"x"}`)); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&OptionalArgs{Query: "x"}, got); diff != "" {
		t.Errorf("input (-want +got):\n%s", diff)
	}
}

func TestCallFunctionError(t *testing.T) {
	errBoom := errors.New("boom")
	tl := tool.Must(tool.New("fail", "", func(context.Context, OptionalArgs) (string, error) {
		return "ignored", errBoom
	}))
	res, err := tl.Call(context.Background(), nil)
	if err != errBoom {
		t.Fatalf("Call = %v, %v; want the function's error unchanged", res, err)
	}
	var ae *tool.ArgumentError
	if errors.As(err, &ae) {
		t.Error("a function error was reported as an argument error")
	}
}

func TestCallCanceled(t *testing.T) {
	var calls atomic.Int64
	var got OptionalArgs
	tl := tool.Must(tool.New("opt", "", recorder(&calls, &got)))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := tl.Call(ctx, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("Call with a canceled context = %v, want context.Canceled", err)
	}
	if calls.Load() != 0 {
		t.Error("the function ran with a canceled context")
	}
}

type Report struct {
	Title string `json:"title"`
	Score int    `json:"score"`
}

func TestResultConversion(t *testing.T) {
	img := model.ImagePart("image/png", []byte{1, 2})
	tests := []struct {
		name string
		out  any
		want *tool.Result
	}{
		{"string", "hello", tool.TextResult("hello")},
		{"empty string", "", tool.TextResult("")},
		{"result pointer", &tool.Result{Parts: []model.Part{img}, IsError: true}, &tool.Result{Parts: []model.Part{img}, IsError: true}},
		{"nil result pointer", (*tool.Result)(nil), &tool.Result{}},
		{"result value", tool.Result{Structured: json.RawMessage(`1`)}, &tool.Result{Structured: json.RawMessage(`1`)}},
		{"part", img, &tool.Result{Parts: []model.Part{img}}},
		{"parts", []model.Part{model.TextPart("a"), img}, &tool.Result{Parts: []model.Part{model.TextPart("a"), img}}},
		{"struct", Report{Title: "t", Score: 3}, &tool.Result{
			Parts:      []model.Part{model.TextPart(`{"title":"t","score":3}`)},
			Structured: json.RawMessage(`{"title":"t","score":3}`),
		}},
		{"struct pointer", &Report{Title: "p"}, &tool.Result{
			Parts:      []model.Part{model.TextPart(`{"title":"p","score":0}`)},
			Structured: json.RawMessage(`{"title":"p","score":0}`),
		}},
		{"int", 42, &tool.Result{Parts: []model.Part{model.TextPart(`42`)}, Structured: json.RawMessage(`42`)}},
		{"slice", []int{1, 2}, &tool.Result{Parts: []model.Part{model.TextPart(`[1,2]`)}, Structured: json.RawMessage(`[1,2]`)}},
		{"nil pointer", (*Report)(nil), &tool.Result{}},
		{"nil slice", []int(nil), &tool.Result{}},
		{"nil", nil, &tool.Result{}},
		{"empty struct", struct{}{}, &tool.Result{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tl := tool.Must(tool.New("conv", "", func(context.Context, struct{}) (any, error) { return tt.out, nil }))
			got, err := tl.Call(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
		})
	}
}

func TestResultConversionStaticTypes(t *testing.T) {
	ctx := context.Background()
	empty := tool.Must(tool.New("empty", "", func(context.Context, struct{}) (struct{}, error) { return struct{}{}, nil }))
	got, err := empty.Call(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&tool.Result{}, got); diff != "" {
		t.Errorf("struct{} output (-want +got):\n%s", diff)
	}
	nilPtr := tool.Must(tool.New("nilptr", "", func(context.Context, struct{}) (*Report, error) { return nil, nil }))
	if got, err = nilPtr.Call(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&tool.Result{}, got); diff != "" {
		t.Errorf("nil *Report output (-want +got):\n%s", diff)
	}
	unencodable := tool.Must(tool.New("chan", "", func(context.Context, struct{}) (chan int, error) { return make(chan int), nil }))
	if _, err := unencodable.Call(ctx, nil); err == nil {
		t.Error("an output that does not encode as JSON gave no error")
	}
}

func TestNewErrors(t *testing.T) {
	type Node struct {
		Name     string `json:"name"`
		Children []Node `json:"children,omitempty"`
	}
	type BadEnum struct {
		N int `json:"n" enum:"1,two"`
	}
	type EnumOnStruct struct {
		L Location `json:"l" enum:"a"`
	}
	str := func(context.Context, string) (string, error) { return "", nil }
	tests := []struct {
		name    string
		new     func() (tool.Tool, error)
		wantIs  error
		wantMsg string
	}{
		{"empty name", func() (tool.Tool, error) { return tool.New("", "", str) }, tool.ErrInvalidName, `invalid name ""`},
		{"space in name", func() (tool.Tool, error) { return tool.New("get weather", "", str) }, tool.ErrInvalidName, "get weather"},
		{"long name", func() (tool.Tool, error) { return tool.New(strings.Repeat("a", 65), "", str) }, tool.ErrInvalidName, "64"},
		{"non-ASCII name", func() (tool.Tool, error) { return tool.New("météo", "", str) }, tool.ErrInvalidName, "météo"},
		{"string input", func() (tool.Tool, error) { return tool.New("s", "", str) }, tool.ErrNotObject, "string is not"},
		{"slice input", func() (tool.Tool, error) {
			return tool.New("s", "", func(context.Context, []int) (string, error) { return "", nil })
		}, tool.ErrNotObject, "[]int"},
		{"recursive", func() (tool.Tool, error) {
			return tool.New("tree", "", func(context.Context, Node) (string, error) { return "", nil })
		}, tool.ErrRecursiveType, "tool_test.Node contains itself"},
		{"unsupported", func() (tool.Tool, error) {
			return tool.New("ch", "", func(context.Context, struct{ C chan int }) (string, error) { return "", nil })
		}, tool.ErrUnsupportedType, "chan int"},
		{"bad enum", func() (tool.Tool, error) {
			return tool.New("e", "", func(context.Context, BadEnum) (string, error) { return "", nil })
		}, nil, "enum tag of field tool_test.BadEnum.N"},
		{"enum on struct", func() (tool.Tool, error) {
			return tool.New("e", "", func(context.Context, EnumOnStruct) (string, error) { return "", nil })
		}, nil, "not tool_test.Location"},
		{"nil function", func() (tool.Tool, error) {
			return tool.New[OptionalArgs, string]("f", "", nil)
		}, nil, "nil function"},
		{"override not an object", func() (tool.Tool, error) {
			return tool.New("o", "", str, tool.WithInputSchema(&jsonschema.Schema{Type: "string"}))
		}, tool.ErrNotObject, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tl, err := tt.new()
			if err == nil {
				t.Fatalf("New = %v, want an error", tl)
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("error %q does not match %v", err, tt.wantIs)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("error %q does not contain %q", err, tt.wantMsg)
			}
		})
	}
}

func TestMustPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("Must did not panic on an error")
		}
	}()
	tool.Must(tool.New("bad name", "", func(context.Context, OptionalArgs) (string, error) { return "", nil }))
}

func TestValidNames(t *testing.T) {
	for _, name := range []string{"a", "get_weather", "get-weather", "Tool2", strings.Repeat("x", 64)} {
		if err := tool.CheckName(name); err != nil {
			t.Errorf("CheckName(%q) = %v", name, err)
		}
	}
}

func TestWithInputSchemaForRecursiveType(t *testing.T) {
	type Node struct {
		Name     string `json:"name"`
		Children []Node `json:"children,omitempty"`
	}
	schema := &jsonschema.Schema{
		Type:     "object",
		Required: []string{"name"},
		Properties: map[string]*jsonschema.Schema{
			"name":     {Type: "string"},
			"children": {Type: "array", Items: &jsonschema.Schema{Ref: "#"}},
		},
	}
	count := func(_ context.Context, n Node) (int, error) {
		var walk func(Node) int
		walk = func(n Node) int {
			c := 1
			for _, k := range n.Children {
				c += walk(k)
			}
			return c
		}
		return walk(n), nil
	}
	tl, err := tool.New("count", "", count, tool.WithInputSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	res, err := tl.Call(context.Background(), json.RawMessage(`{"name":"a","children":[{"name":"b","children":[{"name":"c"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if res.Text() != "3" {
		t.Errorf("result = %q, want 3", res.Text())
	}
	_, err = tl.Call(context.Background(), json.RawMessage(`{"name":"a","children":[{"children":[]}]}`))
	var ae *tool.ArgumentError
	if !errors.As(err, &ae) || !strings.Contains(err.Error(), `missing properties: ["name"]`) {
		t.Errorf("nested missing name: err = %v, want an argument error", err)
	}
}

func TestWithTypeSchemas(t *testing.T) {
	type Celsius float64
	type Args struct {
		T Celsius `json:"t"`
	}
	tl, err := tool.New("temp", "", func(_ context.Context, a Args) (float64, error) { return float64(a.T), nil },
		tool.WithTypeSchemas(map[reflect.Type]*jsonschema.Schema{
			reflect.TypeFor[Celsius](): {Type: "number", Minimum: jsonschema.Ptr(-273.15)},
		}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tl.Call(context.Background(), json.RawMessage(`{"t":-300}`)); err == nil {
		t.Error("a value under the type schema's minimum was accepted")
	}
	if _, err := tl.Call(context.Background(), json.RawMessage(`{"t":20.5}`)); err != nil {
		t.Error(err)
	}
}

// schemaOf returns the tool's parameters as a generic JSON value.
func schemaOf(t *testing.T, tl tool.Tool) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(tl.Definition().Parameters, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestInferredSchema(t *testing.T) {
	type Args struct {
		Data  []byte          `json:"data"`
		Extra json.RawMessage `json:"extra,omitempty"`
		Flag  bool            `json:"flag,omitzero"`
		Skip  string          `json:"-"`
		Plain string
	}
	tl := tool.Must(tool.New("args", "", func(context.Context, Args) (string, error) { return "", nil }))
	want := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"data":  map[string]any{"type": "string", "contentEncoding": "base64"},
			"extra": true,
			"flag":  map[string]any{"type": "boolean"},
			"Plain": map[string]any{"type": "string"},
		},
		"required":             []any{"data", "Plain"},
		"additionalProperties": false,
	}
	if diff := cmp.Diff(want, schemaOf(t, tl)); diff != "" {
		t.Errorf("schema (-want +got):\n%s", diff)
	}
	if _, err := tl.Call(context.Background(), json.RawMessage(`{"data":"AQI=","extra":{"any":[1]},"Plain":""}`)); err != nil {
		t.Error(err)
	}

	empty := tool.Must(tool.New("empty", "", func(context.Context, struct{}) (string, error) { return "", nil }))
	want = map[string]any{"type": "object", "properties": map[string]any{}, "additionalProperties": false}
	if diff := cmp.Diff(want, schemaOf(t, empty)); diff != "" {
		t.Errorf("struct{} schema (-want +got):\n%s", diff)
	}

	ptr := tool.Must(tool.New("ptr", "", func(context.Context, *OptionalArgs) (string, error) { return "", nil }))
	if got := schemaOf(t, ptr)["type"]; got != "object" {
		t.Errorf("pointer input: type = %v, want object", got)
	}
}

func TestDefinitionIsACopy(t *testing.T) {
	tl := tool.Must(tool.New("weather", "Weather.", func(context.Context, WeatherArgs) (string, error) { return "", nil }))
	d := tl.Definition()
	before := string(d.Parameters)
	for i := range d.Parameters {
		d.Parameters[i] = 'x'
	}
	if got := string(tl.Definition().Parameters); got != before {
		t.Errorf("modifying a definition changed the tool's schema to %s", got)
	}
}

func TestOpenAIFormatGolden(t *testing.T) {
	weather := tool.Must(tool.New("get_weather", "Get the current weather in a city.",
		func(context.Context, WeatherArgs) (string, error) { return "", nil }))
	search := tool.Must(tool.New("search", "Search places.",
		func(context.Context, SearchArgs) (string, error) { return "", nil }))
	for _, tl := range []tool.Tool{weather, search} {
		name := tl.Definition().Name
		t.Run(name, func(t *testing.T) {
			got, err := json.MarshalIndent(tl.Definition().OpenAIFormat(), "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			path := filepath.Join("testdata", name+".openai.json")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("OpenAI format (-want +got):\n%s", diff)
			}
		})
	}
}

func BenchmarkCall(b *testing.B) {
	tl := tool.Must(tool.New("search", "", func(_ context.Context, in SearchArgs) (Location, error) { return in.Location, nil }))
	args := json.RawMessage(`{"location":{"city":"Paris","zip":75001},"tags":["a","b"],"limits":{"x":1}}`)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tl.Call(ctx, args); err != nil {
			b.Fatal(err)
		}
	}
}

// TestDefaultTags checks that a `default` tag puts the default in the
// inferred schema, makes the property optional, and sets it in the
// arguments of a call that leaves it out, at the top level and in a nested
// object, while a value the model gives wins.
func TestDefaultTags(t *testing.T) {
	type filter struct {
		Lang  string   `json:"lang,omitempty" default:"go"`
		Kinds []string `json:"kinds" default:"[\"func\",\"type\"]"`
	}
	type search struct {
		Query  string  `json:"query"`
		Limit  int     `json:"limit" default:"10"`
		Exact  bool    `json:"exact" default:"true"`
		Score  float64 `json:"score" default:"0.5"`
		Unit   string  `json:"unit" enum:"km,mi" default:"km"`
		Filter *filter `json:"filter,omitempty"`
	}
	var got search
	tl := tool.Must(tool.New("search", "searches", func(_ context.Context, in search) (string, error) {
		got = in
		return "ok", nil
	}))
	var schema struct {
		Required   []string `json:"required"`
		Properties map[string]struct {
			Default    json.RawMessage `json:"default"`
			Properties map[string]struct {
				Default json.RawMessage `json:"default"`
			} `json:"properties"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(tl.Definition().Parameters, &schema); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"query"}, schema.Required); diff != "" {
		t.Errorf("required (-want +got):\n%s", diff)
	}
	for name, want := range map[string]string{"limit": `10`, "exact": `true`, "score": `0.5`, "unit": `"km"`} {
		if got := string(schema.Properties[name].Default); got != want {
			t.Errorf("default of %s in the schema: %s, want %s", name, got, want)
		}
	}
	if got := string(schema.Properties["filter"].Properties["kinds"].Default); got != `["func","type"]` {
		t.Errorf("default of filter.kinds in the schema: %s", got)
	}

	if _, err := tl.Call(t.Context(), json.RawMessage(`{"query":"q","filter":{}}`)); err != nil {
		t.Fatal(err)
	}
	want := search{Query: "q", Limit: 10, Exact: true, Score: 0.5, Unit: "km", Filter: &filter{Lang: "go", Kinds: []string{"func", "type"}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("arguments left out (-want +got):\n%s", diff)
	}
	if _, err := tl.Call(t.Context(), json.RawMessage(`{"query":"q","limit":3,"exact":false,"unit":"mi"}`)); err != nil {
		t.Fatal(err)
	}
	want = search{Query: "q", Limit: 3, Exact: false, Score: 0.5, Unit: "mi"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("arguments given (-want +got):\n%s", diff)
	}
	// The property without a default stays required.
	var ae *tool.ArgumentError
	if _, err := tl.Call(t.Context(), json.RawMessage(`{}`)); !errors.As(err, &ae) || !strings.Contains(err.Error(), "query") {
		t.Errorf("a call without the required query: %v, want an argument error naming it", err)
	}
}

// TestBadDefaultTags checks that a default the field cannot hold, or that
// its schema refuses, is an error when the tool is made.
func TestBadDefaultTags(t *testing.T) {
	type notInt struct {
		N int `json:"n" default:"ten"`
	}
	type outsideEnum struct {
		U string `json:"u" enum:"km,mi" default:"ft"`
	}
	type badJSON struct {
		L []int `json:"l" default:"[1,"`
	}
	type wrongJSON struct {
		L []int `json:"l" default:"[\"a\"]"`
	}
	for name, mk := range map[string]func() error{
		"not an int": func() error {
			_, err := tool.New("t", "", func(context.Context, notInt) (string, error) { return "", nil })
			return err
		},
		"outside the enum": func() error {
			_, err := tool.New("t", "", func(context.Context, outsideEnum) (string, error) { return "", nil })
			return err
		},
		"not JSON": func() error {
			_, err := tool.New("t", "", func(context.Context, badJSON) (string, error) { return "", nil })
			return err
		},
		"JSON of another type": func() error {
			_, err := tool.New("t", "", func(context.Context, wrongJSON) (string, error) { return "", nil })
			return err
		},
	} {
		if err := mk(); err == nil || !strings.Contains(err.Error(), "default") {
			t.Errorf("%s: %v, want an error about the default", name, err)
		}
	}
}
