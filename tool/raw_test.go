package tool_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/tool"
)

func TestNewRaw(t *testing.T) {
	const schema = `{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`
	tests := []struct {
		name     string
		params   string
		args     string
		wantArgs string // what the function gets when it runs
		wantErr  string // text of the *ArgumentError, when the call fails
	}{
		{name: "valid", params: schema, args: `{"q":"x"}`, wantArgs: `{"q":"x"}`},
		{name: "extra property allowed by the schema", params: schema, args: `{"q":"x","n":1}`, wantArgs: `{"q":"x","n":1}`},
		{name: "missing required", params: schema, args: `{}`, wantErr: `missing properties: ["q"]`},
		{name: "wrong type", params: schema, args: `{"q":1}`, wantErr: `property "q"`},
		{name: "null", params: schema, args: `null`, wantErr: `missing properties: ["q"]`},
		{name: "malformed", params: schema, args: `{"q":`, wantErr: "not valid JSON"},
		{name: "null without schema", params: `{"type":"object"}`, args: ``, wantArgs: `{}`},
		{name: "invalid schema is not enforced", params: `{"type":17}`, args: `{"anything":1}`, wantArgs: `{"anything":1}`},
		{name: "invalid schema still needs JSON", params: `{"type":17}`, args: `{`, wantErr: "not valid JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got json.RawMessage
			calls := 0
			tl := tool.NewRaw(model.ToolDefinition{Name: "raw", Description: "Raw.", Parameters: json.RawMessage(tt.params)},
				func(_ context.Context, args json.RawMessage) (*tool.Result, error) {
					calls++
					got = args
					return nil, nil
				})
			if d := tl.Definition(); string(d.Parameters) != tt.params || d.Name != "raw" || d.Description != "Raw." {
				t.Errorf("Definition() = %+v", d)
			}
			res, err := tl.Call(context.Background(), json.RawMessage(tt.args))
			if tt.wantErr != "" {
				var ae *tool.ArgumentError
				if !errors.As(err, &ae) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("Call(%s) error = %v, want an *ArgumentError containing %q", tt.args, err, tt.wantErr)
				}
				if calls != 0 {
					t.Error("the function ran on bad arguments")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.wantArgs {
				t.Errorf("the function got %s, want %s", got, tt.wantArgs)
			}
			if diff := cmp.Diff(&tool.Result{}, res); diff != "" {
				t.Errorf("a nil result became (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNewRawFunctionError(t *testing.T) {
	errBoom := errors.New("boom")
	tl := tool.NewRaw(model.ToolDefinition{Name: "raw", Parameters: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, json.RawMessage) (*tool.Result, error) { return nil, errBoom })
	if _, err := tl.Call(context.Background(), nil); err != errBoom {
		t.Errorf("Call error = %v, want the function's error unchanged", err)
	}
}
