package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/calf-go/calf/launcher"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
)

// script answers as the writer and the editor would, by their
// instructions, showing what each was given.
func script(t *testing.T) model.Model {
	return modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
		in := req.Messages[len(req.Messages)-1].Text()
		switch req.Messages[0].Text() {
		case writerInstructions:
			return modeltest.Text("drafted " + in), nil
		case editorInstructions:
			return modeltest.Text("edited " + in), nil
		}
		t.Errorf("unexpected system prompt %q", req.Messages[0].Text())
		return modeltest.Text("?"), nil
	})
}

// config is main's configuration on the scripted model, with a store in
// the test's directory.
func config(t *testing.T) *launcher.Config {
	t.Helper()
	rs, err := runners(script(t))
	if err != nil {
		t.Fatal(err)
	}
	return &launcher.Config{Name: "launcher", Runners: rs, Store: "sqlite:" + filepath.Join(t.TempDir(), "calf.db")}
}

// The program's agent, team and workflow, each run once from the command
// line on the embedded default (in-memory broker, SQLite).
func TestRun(t *testing.T) {
	cfg := config(t)
	for _, c := range []struct{ args, want string }{
		{"run a haiku", "drafted a haiku\n"},
		{"run --agent review a haiku", "edited drafted a haiku\n"},
		{"run --agent shout a haiku", "A HAIKU!\n"},
	} {
		var out, errs strings.Builder
		if code := launcher.Run(t.Context(), strings.Fields(c.args), strings.NewReader(""), &out, &errs, cfg); code != 0 || out.String() != c.want {
			t.Errorf("%s: exit %d, output %q, want %q; stderr:\n%s", c.args, code, out.String(), c.want, errs.String())
		}
	}
}

// serve offers them over HTTP with the web chat: the page at /, and the
// team answering through the OpenAI-compatible API.
func TestServe(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- launcher.Run(ctx, []string{"serve", "--addr", "127.0.0.1:0"}, strings.NewReader(""), io.Discard, pw, config(t))
		pw.Close()
	}()
	var base string
	lines := bufio.NewScanner(pr)
	for base == "" && lines.Scan() {
		if _, url, ok := strings.Cut(lines.Text(), "web chat at "); ok {
			base = strings.TrimSuffix(url, "/")
		}
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	if base == "" {
		t.Fatal("serve did not say where the web chat is")
	}
	resp, err := http.Get(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("GET /: %d", resp.StatusCode)
	}
	resp, err = http.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"review","messages":[{"role":"user","content":"a haiku"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "edited drafted a haiku") {
		t.Errorf("the team through the API: %d %s", resp.StatusCode, body)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("serve ended with %d", code)
	}
}
