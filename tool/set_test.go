package tool_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/tool"
)

func namedTool(name string) tool.Tool {
	return tool.Must(tool.New(name, "The "+name+" tool.", func(context.Context, struct{}) (string, error) { return name, nil }))
}

func TestSet(t *testing.T) {
	s, err := tool.NewSet(namedTool("b"), namedTool("a"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Add(namedTool("c")); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"b", "a", "c"}, s.Names()); diff != "" {
		t.Errorf("Names (-want +got):\n%s", diff)
	}
	if s.Len() != 3 || len(s.Tools()) != 3 {
		t.Errorf("Len = %d, len(Tools) = %d, want 3", s.Len(), len(s.Tools()))
	}
	var descs []string
	for _, d := range s.Definitions() {
		descs = append(descs, d.Description)
	}
	if diff := cmp.Diff([]string{"The b tool.", "The a tool.", "The c tool."}, descs); diff != "" {
		t.Errorf("Definitions (-want +got):\n%s", diff)
	}
	if tl, ok := s.Get("a"); !ok || tl.Definition().Name != "a" {
		t.Errorf("Get(a) = %v, %v", tl, ok)
	}
	if _, ok := s.Get("z"); ok {
		t.Error("Get(z) found a tool")
	}
	res, err := s.Call(context.Background(), "c", nil)
	if err != nil || res.Text() != "c" {
		t.Errorf("Call(c) = %v, %v", res, err)
	}
	if _, err := s.Call(context.Background(), "z", nil); !errors.Is(err, tool.ErrUnknownTool) {
		t.Errorf("Call(z) error = %v, want ErrUnknownTool", err)
	}
}

func TestSetAddErrors(t *testing.T) {
	badName := tool.NewRaw(model.ToolDefinition{Name: "bad name", Parameters: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, json.RawMessage) (*tool.Result, error) { return nil, nil })
	tests := []struct {
		name   string
		add    []tool.Tool
		wantIs error
	}{
		{"duplicate of an existing tool", []tool.Tool{namedTool("d"), namedTool("a")}, tool.ErrDuplicateTool},
		{"duplicate within the call", []tool.Tool{namedTool("d"), namedTool("d")}, tool.ErrDuplicateTool},
		{"invalid name", []tool.Tool{namedTool("d"), badName}, tool.ErrInvalidName},
		{"nil tool", []tool.Tool{namedTool("d"), nil}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s tool.Set
			if err := s.Add(namedTool("a")); err != nil {
				t.Fatal(err)
			}
			err := s.Add(tt.add...)
			if err == nil || (tt.wantIs != nil && !errors.Is(err, tt.wantIs)) {
				t.Errorf("Add error = %v, want %v", err, tt.wantIs)
			}
			if diff := cmp.Diff([]string{"a"}, s.Names()); diff != "" {
				t.Errorf("a failed Add changed the set (-want +got):\n%s", diff)
			}
		})
	}
	if _, err := tool.NewSet(namedTool("x"), namedTool("x")); !errors.Is(err, tool.ErrDuplicateTool) {
		t.Errorf("NewSet with a duplicate: error = %v", err)
	}
}

func TestNilSet(t *testing.T) {
	var s *tool.Set
	if s.Len() != 0 || s.Names() != nil || s.Definitions() != nil || s.Tools() != nil {
		t.Error("a nil set is not empty")
	}
	if _, ok := s.Get("a"); ok {
		t.Error("a nil set has a tool")
	}
	if _, err := s.Call(context.Background(), "a", nil); !errors.Is(err, tool.ErrUnknownTool) {
		t.Errorf("Call on a nil set: error = %v, want ErrUnknownTool", err)
	}
}
