package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
)

// script edits greet.go, asks to run a command, and answers with what the
// command's result (or its refusal) said.
func script() *modeltest.TestModel {
	return modeltest.NewTestModel(
		modeltest.ToolCalls(modeltest.Call("c1", "edit_file", `{"path":"greet.go","old_string":"hello","new_string":"hi"}`)),
		modeltest.ToolCalls(modeltest.Call("c2", "bash", `{"command":"grep -c hi greet.go"}`)),
		func(_ context.Context, req *model.Request) (*model.Response, error) {
			return modeltest.Text("Done: " + req.Messages[len(req.Messages)-1].Text()), nil
		},
	)
}

func project(t *testing.T) string {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "greet.go"), []byte("package greet\n\nconst Greeting = \"hello\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestCoderEditsAndAsksBeforeCommands(t *testing.T) {
	for _, tt := range []struct {
		name, answer, want string
	}{
		{"approved", "y\n", "Done: 1"},
		{"refused", "n\n", "the user did not want this command run"},
		{"edited", "echo replaced\n", "Done: replaced"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := project(t)
			var log strings.Builder
			answer, err := run(t.Context(), script(), dir, "say hi", strings.NewReader(tt.answer), &log)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(answer, tt.want) {
				t.Errorf("answer %q, want it to contain %q", answer, tt.want)
			}
			// The edit ran without asking; the command asked once.
			data, _ := os.ReadFile(filepath.Join(dir, "greet.go"))
			if !strings.Contains(string(data), `"hi"`) {
				t.Errorf("greet.go after the run:\n%s", data)
			}
			if n := strings.Count(log.String(), "Run `grep -c hi greet.go`?"); n != 1 {
				t.Errorf("asked %d times:\n%s", n, log.String())
			}
		})
	}
}
