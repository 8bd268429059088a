package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/calf-go/calf/examples/internal/extest"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/cassette"
	"github.com/calf-go/calf/model/modeltest"
)

// script edits greet.go, asks to run a command, and answers with what the
// command's result (or its refusal) said.
//
// The tests run the example through model/openai, replaying their
// cassettes in testdata. The committed cassettes were recorded against a
// local OpenAI-compatible server (model/modeltest's) answering with this
// script; to record them against a real provider instead:
//
//	CALF_RECORD=1 OPENAI_API_KEY=... go test ./examples/coder
func script() *modeltest.TestModel {
	return modeltest.NewTestModel(
		modeltest.ToolCalls(modeltest.Call("c1", "edit_file", `{"path":"greet.go","old_string":"hello","new_string":"hi"}`)),
		modeltest.ToolCalls(modeltest.Call("c2", "bash", `{"command":"grep -c hi greet.go"}`)),
		func(_ context.Context, req *model.Request) (*model.Response, error) {
			return modeltest.Text("Done: " + req.Messages[len(req.Messages)-1].Text()), nil
		},
	)
}

// durations are the run times that bash's results end with.
var durations = regexp.MustCompile(`, [0-9.]+[µmn]?s\]`)

// scrubMachine takes out of a request's body what changes from run to run
// or machine to machine, before the request is recorded or matched: the
// run times of bash's results, and bash's description, which says whether
// the machine sandboxes commands.
func scrubMachine(req *http.Request) error {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return err
	}
	var w map[string]any
	if err := json.Unmarshal(durations.ReplaceAll(body, []byte(", DURATION]")), &w); err != nil {
		return err
	}
	tools, _ := w["tools"].([]any)
	for _, t := range tools {
		if f, ok := t.(map[string]any)["function"].(map[string]any); ok && f["name"] == "bash" {
			f["description"] = "(bash's description, which depends on the machine)"
		}
	}
	body, err = json.Marshal(w)
	if err != nil {
		return err
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	return nil
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
			m := extest.ModelWith(t, "testdata/coder-"+tt.name+".httprr", script().Generate, &cassette.Options{Scrub: scrubMachine})
			answer, err := run(t.Context(), m, dir, "say hi", strings.NewReader(tt.answer), &log)
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
