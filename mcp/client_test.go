package mcp_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/internal/peers"
	"github.com/calf-go/calf/internal/testwait"
	"github.com/calf-go/calf/mcp"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	storemem "github.com/calf-go/calf/store/memory"
	"github.com/calf-go/calf/tool"
)

func newRuntime(t *testing.T) *agent.Runtime {
	t.Helper()
	b := memory.New(nil)
	c := calf.NewClient(b, nil)
	st := storemem.New()
	t.Cleanup(func() {
		_ = c.Close()
		_ = b.Close()
		_ = st.Close()
	})
	return agent.NewRuntime(c, st, nil)
}

func runCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// everything returns the config of the reference server
// server-everything over stdio.
func everything(t *testing.T) mcp.Config {
	return mcp.Config{
		Name:    "everything",
		Command: peers.Node(t),
		Args:    []string{peers.Package(t, "@modelcontextprotocol/server-everything/dist/index.js")},
	}
}

// script is a model that makes the calls of each turn in order, then
// answers with the text of every tool result it got, one per line. It
// keeps the tool results it saw.
type script struct {
	turns [][]model.ToolCall
	mu    sync.Mutex
	seen  []model.Message
}

func (s *script) model() modeltest.FunctionModel {
	return func(_ context.Context, req *model.Request) (*model.Response, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		var results []model.Message
		turn := 0
		for _, m := range req.Messages {
			switch m.Role {
			case model.RoleAssistant:
				turn++
			case model.RoleTool:
				results = append(results, m)
			}
		}
		s.seen = results
		if turn < len(s.turns) {
			return modeltest.ToolCalls(s.turns[turn]...), nil
		}
		var b strings.Builder
		for _, r := range results {
			fmt.Fprintln(&b, r.Text())
		}
		return modeltest.Text(b.String()), nil
	}
}

func (s *script) results() []model.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seen
}

func names(tools []tool.Tool) map[string]tool.Kind {
	m := map[string]tool.Kind{}
	for _, t := range tools {
		m[t.Definition().Name] = tool.KindOf(t)
	}
	return m
}

// An agent calls server-everything's tools over stdio: text, image and
// structured results come back, and the tools' kinds follow their
// annotations.
func TestEverythingStdio(t *testing.T) {
	c, err := mcp.New(everything(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	testEverything(t, c)
}

func testEverything(t *testing.T, c *mcp.Client) {
	t.Helper()
	ctx := runCtx(t)
	tools, err := c.Tools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := names(tools)
	for name, kind := range map[string]tool.Kind{
		"everything__echo": "", "everything__get-sum": tool.KindRead,
		"everything__get-tiny-image": "", "everything__get-structured-content": tool.KindRead,
	} {
		k, ok := got[name]
		if !ok || (kind != "" && k != kind) {
			t.Errorf("tool %s: kind %q, offered %t; want kind %q among %v", name, k, ok, kind, got)
		}
	}

	rt := newRuntime(t)
	s := &script{turns: [][]model.ToolCall{{
		modeltest.Call("c1", "everything__echo", `{"message":"hello from calf"}`),
		modeltest.Call("c2", "everything__get-sum", `{"a":2,"b":40}`),
		modeltest.Call("c3", "everything__get-tiny-image", `{}`),
		modeltest.Call("c4", "everything__get-structured-content", `{"location":"Chicago"}`),
		modeltest.Call("c5", "everything__get-sum", `{"a":"two"}`),
		modeltest.Call("c6", "everything__get-resource-links", `{"count":2}`),
	}}}
	a := agent.Must(agent.New("mcpuser", s.model(), &agent.Options{Toolsets: []tool.Toolset{c}}))
	if err := a.Serve(ctx, rt, nil); err != nil {
		t.Fatal(err)
	}
	out, err := a.Run(ctx, rt, "use the tools", nil)
	if err != nil {
		t.Fatal(err)
	}
	res := s.results()
	if len(res) != 6 {
		t.Fatalf("%d tool results; want 6: %s", len(res), out.Output)
	}
	byID := map[string]model.Message{}
	for _, m := range res {
		byID[m.ToolCallID] = m
	}
	if txt := byID["c1"].Text(); !strings.Contains(txt, "hello from calf") {
		t.Errorf("echo: %q", txt)
	}
	if txt := byID["c2"].Text(); !strings.Contains(txt, "42") {
		t.Errorf("get-sum: %q", txt)
	}
	var image *model.Part
	for i, p := range byID["c3"].Parts {
		if p.Type == model.PartImage {
			image = &byID["c3"].Parts[i]
		}
	}
	if image == nil || image.MIMEType != "image/png" || len(image.Data) < 50 {
		t.Errorf("get-tiny-image: parts %+v; want a PNG", byID["c3"].Parts)
	}
	if txt := byID["c4"].Text(); !strings.Contains(txt, "drizzle") {
		t.Errorf("get-structured-content: %q", txt)
	}
	// Resource links are described in text, with their URIs.
	if txt := byID["c6"].Text(); strings.Count(txt, "Resource link:") != 2 || !strings.Contains(txt, "://") {
		t.Errorf("get-resource-links: %q", txt)
	}
	// Arguments that fail the tool's schema are refused before they reach
	// the server, with a message for the model.
	if txt := byID["c5"].Text(); !strings.Contains(txt, "invalid arguments") {
		t.Errorf("bad arguments: %q", txt)
	}
}

// freePort returns a free TCP port on the loopback interface.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// The same over streamable HTTP, with a header on every request.
func TestEverythingStreamableHTTP(t *testing.T) {
	port := freePort(t)
	cmd := exec.Command(peers.Node(t), peers.Package(t, "@modelcontextprotocol/server-everything/dist/index.js"), "streamableHttp")
	cmd.Env = append(os.Environ(), "PORT="+strconv.Itoa(port))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	addr := "127.0.0.1:" + strconv.Itoa(port)
	testwait.ForErr(t, 20*time.Second, "server-everything to listen on "+addr, func() error {
		conn, err := net.Dial("tcp", addr)
		if err == nil {
			conn.Close()
		}
		return err
	})
	c, err := mcp.New(mcp.Config{Name: "everything", URL: "http://" + addr + "/mcp", Headers: map[string][]string{"X-Calf-Test": {"1"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	testEverything(t, c)
}

// An agent writes and reads files through server-filesystem, confined to
// its root; a path outside the root is refused by the server, and the
// model is told.
func TestFilesystemServer(t *testing.T) {
	root := t.TempDir()
	root, _ = filepath.EvalSymlinks(root)
	c, err := mcp.New(mcp.Config{
		Name:    "fs",
		Command: peers.Node(t),
		Args:    []string{peers.Package(t, "@modelcontextprotocol/server-filesystem/dist/index.js"), root},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := runCtx(t)
	note := filepath.Join(root, "note.txt")
	s := &script{turns: [][]model.ToolCall{
		{modeltest.Call("w", "fs__write_file", fmt.Sprintf(`{"path":%q,"content":"calf was here"}`, note))},
		{
			modeltest.Call("r", "fs__read_text_file", fmt.Sprintf(`{"path":%q}`, note)),
			modeltest.Call("x", "fs__read_text_file", `{"path":"/etc/hostname"}`),
		},
	}}
	rt := newRuntime(t)
	a := agent.Must(agent.New("filer", s.model(), &agent.Options{Toolsets: []tool.Toolset{c}}))
	if err := a.Serve(ctx, rt, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Run(ctx, rt, "write and read a note", nil); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(note)
	if err != nil || string(data) != "calf was here" {
		t.Fatalf("the note holds %q (%v)", data, err)
	}
	byID := map[string]model.Message{}
	for _, m := range s.results() {
		byID[m.ToolCallID] = m
	}
	if txt := byID["r"].Text(); txt != "calf was here" {
		t.Errorf("read_text_file: %q", txt)
	}
	if txt := byID["x"].Text(); !strings.Contains(strings.ToLower(txt), "denied") && !strings.Contains(strings.ToLower(txt), "outside") {
		t.Errorf("a path outside the root: %q; want it refused", txt)
	}
}

// A server killed during a run is started again, and the run goes on: the
// call after the kill reaches a new process.
func TestServerKilledMidRunIsRestarted(t *testing.T) {
	c, pidFile := everythingWithPIDs(t)
	pids := func() []string {
		data, _ := os.ReadFile(pidFile)
		return strings.Fields(string(data))
	}
	killed := make(chan struct{})
	var once sync.Once
	// The model calls echo, then (once the server is killed) echo again
	// until a call succeeds, at most three times.
	m := modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
		var results []model.Message
		for _, msg := range req.Messages {
			if msg.Role == model.RoleTool {
				results = append(results, msg)
			}
		}
		switch {
		case len(results) == 0:
			return modeltest.ToolCalls(modeltest.Call("c0", "everything__echo", `{"message":"before"}`)), nil
		case len(results) == 1:
			once.Do(func() {
				p := pids()
				pid, _ := strconv.Atoi(p[len(p)-1])
				_ = syscall.Kill(pid, syscall.SIGKILL)
				close(killed)
			})
		}
		last := results[len(results)-1]
		if strings.Contains(last.Text(), "Echo: after") || len(results) > 4 {
			return modeltest.Text(last.Text()), nil
		}
		return modeltest.ToolCalls(modeltest.Call(fmt.Sprintf("c%d", len(results)), "everything__echo", `{"message":"after"}`)), nil
	})
	rt := newRuntime(t)
	ctx := runCtx(t)
	a := agent.Must(agent.New("survivor", m, &agent.Options{Toolsets: []tool.Toolset{c}}))
	if err := a.Serve(ctx, rt, nil); err != nil {
		t.Fatal(err)
	}
	out, err := a.Run(ctx, rt, "echo across a crash", nil)
	if err != nil {
		t.Fatal(err)
	}
	<-killed
	if !strings.Contains(out.Output, "Echo: after") {
		t.Errorf("the run ended with %q; want the echo after the restart", out.Output)
	}
	if p := pids(); len(p) != 2 || p[0] == p[1] {
		t.Errorf("server processes %v; want the first and one restart", p)
	}
	for _, msg := range out.Messages {
		if msg.Role == model.RoleTool {
			t.Logf("%s: %s", msg.ToolCallID, msg.Text())
		}
	}
}

// A command's process starts at the first model call, not before, and
// stops when the runtime's client shuts down.
func TestServerStartsLazilyAndStopsWithTheRuntime(t *testing.T) {
	c, pidFile := everythingWithPIDs(t)
	rt := newRuntime(t)
	ctx := runCtx(t)
	s := &script{turns: [][]model.ToolCall{{modeltest.Call("c", "everything__echo", `{"message":"x"}`)}}}
	a := agent.Must(agent.New("lazy", s.model(), &agent.Options{Toolsets: []tool.Toolset{c}}))
	if err := a.Serve(ctx, rt, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(pidFile); !os.IsNotExist(err) {
		t.Fatalf("the server started before any run: %v", err)
	}
	if _, err := a.Run(ctx, rt, "echo", nil); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	if err := rt.Client().Close(); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 15*time.Second, fmt.Sprintf("server process %d to end after the shutdown", pid), func() bool {
		return syscall.Kill(pid, 0) != nil
	})
}

// everythingWithPIDs returns a client of server-everything started through
// a shell that appends the pid of each process it starts to the file it
// returns.
func everythingWithPIDs(t *testing.T) (*mcp.Client, string) {
	t.Helper()
	pidFile := filepath.Join(t.TempDir(), "pid")
	cfg := everything(t)
	cfg.Args = []string{"-c", `echo $$ >> "$0"; exec "$1" "$2"`, pidFile, cfg.Command, cfg.Args[0]}
	cfg.Command = "/bin/sh"
	c, err := mcp.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, pidFile
}
