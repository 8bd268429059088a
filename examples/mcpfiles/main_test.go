package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/calf-go/calf/internal/peers"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
)

// The agent writes a file and lists the directory through the real
// filesystem server. Unlike the other examples' tests, it runs on a
// scripted model, not on a cassette: its tool calls name a temporary
// directory, which differs from run to run, so recorded requests and
// answers would not match a replay.
func TestMCPFiles(t *testing.T) {
	server := []string{peers.Node(t), peers.Package(t, "@modelcontextprotocol/server-filesystem/dist/index.js")}
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("alpha"), 0o644); err != nil {
		t.Fatal(err)
	}
	m := modeltest.NewTestModel(
		modeltest.ToolCalls(modeltest.Call("w", "fs__write_file", fmt.Sprintf(`{"path":%q,"content":"one file: a.txt"}`, filepath.Join(dir, "summary.md")))),
		modeltest.ToolCalls(modeltest.Call("l", "fs__list_directory", fmt.Sprintf(`{"path":%q}`, dir))),
		func(_ context.Context, req *model.Request) (*model.Response, error) {
			return modeltest.Text("listed: " + req.Messages[len(req.Messages)-1].Text()), nil
		},
	)
	var log strings.Builder
	answer, err := run(t.Context(), m, server, dir, "summarize", &log)
	if err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(filepath.Join(dir, "summary.md")); err != nil || string(data) != "one file: a.txt" {
		t.Errorf("summary.md holds %q (%v)", data, err)
	}
	if !strings.Contains(answer, "[FILE] a.txt") || !strings.Contains(answer, "[FILE] summary.md") {
		t.Errorf("answer %q; want both files listed", answer)
	}
	if !strings.Contains(log.String(), "-> fs__write_file") {
		t.Errorf("log %q", log.String())
	}
}
