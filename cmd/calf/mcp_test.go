package main

import (
	"context"
	"strings"
	"testing"

	"github.com/calf-go/calf/internal/peers"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
)

// calf run --mcp gives the agent a server's tools: the model is offered
// them, its call reaches the server, and the answer uses the result.
func TestRunMCP(t *testing.T) {
	isolate(t)
	server := peers.Node(t) + " " + peers.Package(t, "@modelcontextprotocol/server-everything/dist/index.js")
	var offered []string
	srv := modeltest.NewServer(func(_ context.Context, req *model.Request) (*model.Response, error) {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == model.RoleTool {
			return modeltest.Text("Done: " + last.Text()), nil
		}
		offered = offered[:0]
		for _, d := range req.Tools {
			offered = append(offered, d.Name)
		}
		return modeltest.ToolCalls(modeltest.Call("c1", "ev__get-sum", `{"a": 19, "b": 23}`)), nil
	})
	t.Cleanup(srv.Close)
	got := runMain(t.Context(), "", "run", "--store", "memory:", "--model", srv.URL()+"#m", "--mcp", "ev="+server, "add 19 and 23")
	if got.code != exitOK || !strings.Contains(got.stdout, "42") {
		t.Fatalf("calf run --mcp = %d\nstdout %q\nstderr %q", got.code, got.stdout, got.stderr)
	}
	if !strings.Contains(strings.Join(offered, " "), "ev__echo") {
		t.Errorf("tools offered: %v; want the server's", offered)
	}
	// A malformed --mcp is a usage error.
	for _, bad := range []string{"noequals", "=cmd", "bad name=cmd", "x=ftp://host/mcp"} {
		got := runMain(t.Context(), "", "run", "--store", "memory:", "--model", srv.URL()+"#m", "--mcp", bad, "hi")
		if got.code != exitUsage || !strings.Contains(got.stderr, "--mcp") {
			t.Errorf("--mcp %q: exit %d, stderr %q; want a usage error", bad, got.code, got.stderr)
		}
	}
}
