package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/tool"
	"github.com/calf-go/calf/tool/builtin"
)

// runUser is what calf serve gives a run of a server with several users:
// the user who started it. It travels with the run (agent.RunOptions.Deps)
// to whichever process serves it, whose file and bash tools then work in
// that user's directory (userRoot).
type runUser struct {
	User string `json:"user"`
}

// runUsers is the handle of runUser dependencies.
var runUsers agent.Deps[runUser]

// userRootsDir is the directory, beneath a tool directory, of the users'
// own directories.
const userRootsDir = "users"

// userDirName returns the name of user's directory: the name itself when
// it is made of ASCII letters, digits, '-' and '_' only, else the name with
// every other byte written as '=' and two hex digits, so that no name
// leads elsewhere ("..", "a/b") and two names never share a directory.
// A name longer than 64 bytes once escaped is "==" and its SHA-256.
func userDirName(user string) string {
	var b strings.Builder
	for i := 0; i < len(user); i++ {
		c := user[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "=%02x", c)
		}
	}
	if b.Len() == 0 || b.Len() > 64 {
		sum := sha256.Sum256([]byte(user))
		return "==" + hex.EncodeToString(sum[:])
	}
	return b.String()
}

// userRoot returns user's directory beneath root (root/users/NAME),
// creating it, readable by this system user only, when missing.
func userRoot(root, user string) (string, error) {
	dir := filepath.Join(root, userRootsDir, userDirName(user))
	if err := os.MkdirAll(filepath.Join(root, userRootsDir), 0o700); err != nil {
		return "", err
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return "", err
	}
	// Refuse a directory that is a link, or not a directory: it was not
	// made here.
	fi, err := os.Lstat(dir)
	if err != nil {
		return "", err
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("%s is not a directory", dir)
	}
	return dir, nil
}

// perUser is a tool that works in a directory of the run's user, when the
// run has one (runUser), and in its root otherwise: a tool of the same
// name, made by mk for that directory, carries out each call.
type perUser struct {
	base tool.Tool // the tool on the root: its definition, and runs without user
	root string
	mk   func(dir string) (tool.Tool, error)

	mu    sync.Mutex
	users map[string]tool.Tool
}

// forEachUser returns t, made by mk for root, as a perUser tool.
func forEachUser(root string, t tool.Tool, mk func(dir string) (tool.Tool, error)) *perUser {
	return &perUser{base: t, root: root, mk: mk, users: map[string]tool.Tool{}}
}

func (p *perUser) Definition() model.ToolDefinition { return p.base.Definition() }

// Kind returns the kind of the tool it stands for.
func (p *perUser) Kind() tool.Kind { return tool.KindOf(p.base) }

// Sandboxed reports whether the tool it stands for runs in a sandbox,
// for a bash tool.
func (p *perUser) Sandboxed() bool {
	s, ok := p.base.(interface{ Sandboxed() bool })
	return ok && s.Sandboxed()
}

func (p *perUser) Call(ctx context.Context, args json.RawMessage) (*tool.Result, error) {
	t, err := p.tool(ctx)
	if err != nil {
		return nil, err
	}
	return t.Call(ctx, args)
}

// tool returns the tool for the user of ctx's run.
func (p *perUser) tool(ctx context.Context) (tool.Tool, error) {
	rc, ok := agent.FromContext(ctx)
	if !ok {
		return p.base, nil
	}
	u, err := runUsers.Of(rc)
	if err != nil {
		return nil, err
	}
	if u.User == "" {
		return p.base, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if t, ok := p.users[u.User]; ok {
		return t, nil
	}
	dir, err := userRoot(p.root, u.User)
	if err != nil {
		return nil, fmt.Errorf("the user's working directory: %w", err)
	}
	t, err := p.mk(dir)
	if err != nil {
		return nil, err
	}
	if sb, ok := t.(interface{ Sandboxed() bool }); ok && !sb.Sandboxed() {
		// Unsandboxed, a command reaches the other users' directories.
		return nil, errors.New("bash runs without a sandbox here (bubblewrap is not installed), so it cannot keep users apart: it is not offered to the runs of a server with several users")
	}
	p.users[u.User] = t
	return t, nil
}

// userTools returns tools, made on root by mk, each working in the
// directory of the run's user when the run has one.
func userTools(root string, mk func(dir string) ([]tool.Tool, error)) ([]tool.Tool, error) {
	base, err := mk(root)
	if err != nil {
		return nil, err
	}
	out := make([]tool.Tool, len(base))
	for i, t := range base {
		out[i] = forEachUser(root, t, func(dir string) (tool.Tool, error) {
			ts, err := mk(dir)
			if err != nil {
				return nil, err
			}
			return ts[i], nil
		})
	}
	return out, nil
}

// bashTool returns the bash tool on root, working in the directory of the
// run's user when the run has one.
func bashTool(root string) (tool.Tool, error) {
	sh, err := builtin.Bash(root, nil)
	if err != nil {
		return nil, err
	}
	return forEachUser(root, sh, func(dir string) (tool.Tool, error) { return builtin.Bash(dir, nil) }), nil
}
