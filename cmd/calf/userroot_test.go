package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
)

// toolCallModel answers a user message "CALL NAME ARGS" with that tool
// call, and a tool result with its text; anything else with "done".
func toolCallModel(_ context.Context, req *model.Request) (*model.Response, error) {
	last := req.Messages[len(req.Messages)-1]
	if last.Role == model.RoleTool {
		return modeltest.Text("RESULT " + last.Text()), nil
	}
	if rest, ok := strings.CutPrefix(last.Text(), "CALL "); ok {
		name, args, _ := strings.Cut(rest, " ")
		return modeltest.ToolCalls(modeltest.Call("call_1", name, args)), nil
	}
	return modeltest.Text("done"), nil
}

// With the tokens of several users, calf serve gives each user's file and
// bash tools a directory of their own: what one user's run writes, another
// user's run can neither read nor change, whatever the path or user name.
func TestServeUsersHaveToolRootsOfTheirOwn(t *testing.T) {
	isolate(t)
	srv := modeltest.NewServer(toolCallModel)
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	_, bwrapErr := exec.LookPath("bwrap")
	withBash := bwrapErr == nil
	if !withBash && os.Getenv("CALF_TEST_SERVICES") != "" {
		t.Fatal("bubblewrap (bwrap) is not installed")
	}
	const (
		ann  = "ann-0123456789abcdef"
		bob  = "bob-0123456789abcdef"
		evil = "evil-0123456789abcdef"
	)
	args := []string{"serve", "--store", "memory:", "--model", srv.URL() + "#m", "--mode", "bypass", "--edit", dir,
		"--token", "ann:" + ann, "--token", "bob:" + bob, "--token", "../..:" + evil}
	if withBash {
		args = append(args, "--bash", dir)
	} else {
		t.Log("bubblewrap is not installed: the bash tool is not tested")
	}
	addr := freeAddr(t)
	serveInBackground(t, append(args, "--addr", addr)...)
	waitListening(t, addr)
	call := func(token, tool string, in any) string {
		t.Helper()
		a, _ := json.Marshal(in)
		body, _ := json.Marshal(map[string]any{"model": "assistant", "messages": []map[string]string{{"role": "user", "content": "CALL " + tool + " " + string(a)}}})
		req, _ := http.NewRequestWithContext(t.Context(), "POST", "http://"+addr+"/v1/chat/completions", strings.NewReader(string(body)))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		var cc struct {
			Choices []struct {
				Message struct {
					Content string `json:"content"`
				} `json:"message"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(data, &cc); resp.StatusCode != 200 || err != nil || len(cc.Choices) != 1 {
			t.Fatalf("%s: %d %s", tool, resp.StatusCode, data)
		}
		return cc.Choices[0].Message.Content
	}
	const secret = "ann's secret"
	if got := call(ann, "write_file", map[string]string{"path": "notes-a.txt", "content": secret}); strings.Contains(got, "rror") {
		t.Fatalf("ann's write_file: %s", got)
	}
	if got := call(ann, "read_file", map[string]string{"path": "notes-a.txt"}); !strings.Contains(got, secret) {
		t.Fatalf("ann reads her file: %s", got)
	}
	annFile := filepath.Join(dir, "users", "ann", "notes-a.txt")
	for _, p := range []string{"notes-a.txt", "../ann/notes-a.txt", "../../notes-a.txt", annFile, "users/ann/notes-a.txt"} {
		if got := call(bob, "read_file", map[string]string{"path": p}); strings.Contains(got, secret) {
			t.Errorf("bob reads ann's file as %s: %s", p, got)
		}
		if got := call(bob, "edit_file", map[string]string{"path": p, "old_string": secret, "new_string": "bob was here"}); !strings.Contains(got, "RESULT") {
			t.Errorf("bob edits %s: %s", p, got)
		}
		if got := call(bob, "write_file", map[string]string{"path": p, "content": "bob was here"}); !strings.Contains(got, "RESULT") {
			t.Errorf("bob writes %s: %s", p, got)
		}
	}
	if fi, err := os.Stat(filepath.Dir(annFile)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("ann's directory: %v", fi.Mode().Perm())
	}
	// The user "../..": its files stay in a directory of its own.
	call(evil, "write_file", map[string]string{"path": "x.txt", "content": "evil"})
	if _, err := os.Stat(filepath.Join(dir, "users", userDirName("../.."), "x.txt")); err != nil {
		t.Errorf("the file of user ../..: %v", err)
	}
	for _, p := range []string{"../ann/notes-a.txt", "../../users/ann/notes-a.txt", annFile} {
		if got := call(evil, "read_file", map[string]string{"path": p}); strings.Contains(got, secret) {
			t.Errorf("user ../.. reads ann's file as %s: %s", p, got)
		}
	}
	if data, err := os.ReadFile(annFile); err != nil || string(data) != secret {
		t.Errorf("ann's file now: %q, %v", data, err)
	}
	if withBash {
		for _, cmd := range []string{"cat notes-a.txt", "cat ../ann/notes-a.txt", "cat " + annFile, "cat ../../users/ann/notes-a.txt", "ls -R / 2>/dev/null | head -1000"} {
			if got := call(bob, "bash", map[string]string{"command": cmd}); strings.Contains(got, secret) {
				t.Errorf("bob's bash reads ann's file with %s: %s", cmd, got)
			}
		}
		if got := call(ann, "bash", map[string]string{"command": "cat notes-a.txt"}); !strings.Contains(got, secret) {
			t.Errorf("ann's bash: %s", got)
		}
	}
}

// Without bubblewrap, calf serve refuses --bash with the tokens of several
// users, saying what to do.
func TestServeRefusesSharedBashWithoutSandbox(t *testing.T) {
	isolate(t)
	if _, err := exec.LookPath("bwrap"); err == nil {
		t.Skip("bubblewrap is installed")
	}
	got := runMain(t.Context(), "", "serve", "--store", "memory:", "--model", "http://127.0.0.1:1/v1#m", "--bash", t.TempDir(),
		"--token", "ann:ann-0123456789abcdef", "--token", "bob:bob-0123456789abcdef", "--addr", "127.0.0.1:0")
	if got.code != exitUsage || !strings.Contains(got.stderr, "install bubblewrap") {
		t.Errorf("exit %d, %s", got.code, got.stderr)
	}
}

func TestUserDirName(t *testing.T) {
	seen := map[string]string{}
	for _, u := range []string{"ann", "Ann", "a_b", "a/b", "a=2fb", "..", ".", "../..", "", "a\x00b", "é", strings.Repeat("x", 300), strings.Repeat("x", 301), "==", "users"} {
		d := userDirName(u)
		if d == "" || d == "." || d == ".." || strings.ContainsAny(d, `/\`+"\x00") || len(d) > 255 {
			t.Errorf("userDirName(%q) = %q", u, d)
		}
		if other, dup := seen[d]; dup {
			t.Errorf("users %q and %q share %q", other, u, d)
		}
		seen[d] = u
	}
}

// The tools of --agents prototypes work in --root alone: calf serve
// refuses it with the tokens of several users, saying what to do.
func TestServeRefusesSharedRoot(t *testing.T) {
	isolate(t)
	file := agentsFile(t, "http://127.0.0.1:1/v1")
	got := runMain(t.Context(), "", "serve", "--store", "memory:", "--agents", file, "--root", t.TempDir(),
		"--token", "ann:ann-0123456789abcdef", "--token", "bob:bob-0123456789abcdef", "--addr", "127.0.0.1:0")
	if got.code != exitUsage || !strings.Contains(got.stderr, "serve one user") {
		t.Errorf("exit %d, %s", got.code, got.stderr)
	}
}
