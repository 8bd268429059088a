package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/calf-go/calf/internal/peers"
	"github.com/calf-go/calf/internal/testwait"
	"github.com/calf-go/calf/mcp"
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

// calf mcp serve offers the agent as an MCP tool over standard input and
// output: a client's call is a run, and its answer the result.
func TestMCPServeStdio(t *testing.T) {
	isolate(t)
	srv, _ := newFakeServer(t)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	code := make(chan int, 1)
	var stderr bytes.Buffer
	go func() {
		code <- Main(ctx, []string{"mcp", "serve", "--store", "memory:", "--model", srv.URL() + "#m"}, inR, outW, &stderr)
		outW.Close()
	}()
	client := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &sdk.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tools, err := cs.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) != 1 || tools.Tools[0].Name != "assistant" {
		t.Fatalf("tools %+v, %v; want the assistant", tools, err)
	}
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "assistant", Arguments: map[string]any{"prompt": "hello there"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || res.Content[0].(*sdk.TextContent).Text != "You said: hello there" {
		t.Errorf("result %+v", res.Content[0])
	}
	cs.Close()
	inW.Close()
	select {
	case c := <-code:
		if c != exitOK {
			t.Errorf("calf mcp serve exited %d: %s", c, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("calf mcp serve did not end when its client went away")
	}
}

// Over HTTP: on loopback by default; beyond it only with a token, which
// clients must then send.
func TestMCPServeHTTP(t *testing.T) {
	isolate(t)
	srv, _ := newFakeServer(t)
	got := runMain(t.Context(), "", "mcp", "serve", "--store", "memory:", "--model", srv.URL()+"#m", "--http", "0.0.0.0:0")
	if got.code != exitUsage || !strings.Contains(got.stderr, "bearer token") {
		t.Errorf("beyond loopback without a token: %d %q", got.code, got.stderr)
	}
	addr := freeAddr(t)
	ctx := serveInBackground(t, "mcp", "serve", "--store", "memory:", "--model", srv.URL()+"#m", "--http", addr, "--token", "t0k")
	waitListening(t, addr)
	url := "http://" + addr + "/mcp"
	bad, _ := mcp.New(mcp.Config{Name: "calf", URL: url})
	defer bad.Close()
	if _, err := bad.Tools(ctx); err == nil {
		t.Error("a client without the token listed the tools")
	}
	c, _ := mcp.New(mcp.Config{Name: "calf", URL: url, Headers: http.Header{"Authorization": {"Bearer t0k"}}})
	defer c.Close()
	tools, err := c.Tools(ctx)
	if err != nil || len(tools) != 1 {
		t.Fatalf("tools %d, %v", len(tools), err)
	}
	res, err := tools[0].Call(ctx, json.RawMessage(`{"prompt":"over http"}`))
	if err != nil || res.Text() != "You said: over http" {
		t.Errorf("call: %v, %v", res, err)
	}
}

// freeAddr returns a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// serveInBackground runs calf with args until the test ends, when it
// checks that calf exited cleanly; it returns the test's context.
func serveInBackground(t *testing.T, args ...string) context.Context {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	code := make(chan int, 1)
	go func() { code <- Main(ctx, args, strings.NewReader(""), io.Discard, io.Discard) }()
	t.Cleanup(func() {
		cancel()
		if c := <-code; c != exitOK {
			t.Errorf("calf %v exited %d", args, c)
		}
	})
	return t.Context()
}

// waitListening waits until something listens on addr.
func waitListening(t *testing.T, addr string) {
	t.Helper()
	testwait.ForErr(t, 20*time.Second, "something to listen on "+addr, func() error {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err
	})
}
