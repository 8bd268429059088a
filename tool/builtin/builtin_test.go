package builtin_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/calf-go/calf/tool"
	"github.com/calf-go/calf/tool/builtin"
)

// newTree creates a directory tree for the tools and a directory outside
// it that symbolic links in the tree point to. It returns the tree's root.
func newTree(t *testing.T) string {
	t.Helper()
	outside := t.TempDir()
	root := t.TempDir()
	files := map[string]string{
		"a.txt":              "alpha\nbeta\ngamma\n",
		"crlf.txt":           "one\r\ntwo\r\n",
		"noeol.txt":          "last line",
		"empty.txt":          "",
		"bin.dat":            "ab\x00cd hello",
		"src/main.go":        "package main\n\nfunc main() {\n\tprintln(\"hello\")\n}\n",
		"src/util/helper.go": "package util\n\n// TODO: say Hello\n",
		"src/util/notes.md":  "notes\n",
		"docs/guide.md":      "# Guide\nhello world\n",
		".git/config":        "hello from git\n",
	}
	for name, content := range files {
		write(t, filepath.Join(root, name), content)
	}
	write(t, filepath.Join(outside, "secret.txt"), "hello secret\n")
	links := map[string]string{
		"link_in":     "a.txt",
		"link_src":    "src",
		"link_out":    filepath.Join(outside, "secret.txt"),
		"link_outdir": outside,
		"link_up":     "../",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Skipf("symbolic links: %v", err)
		}
	}
	return root
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// call calls tl with args encoded as JSON and returns the result's text.
func call(t *testing.T, tl tool.Tool, args any) (string, error) {
	t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	res, err := tl.Call(context.Background(), raw)
	if err != nil {
		return "", err
	}
	if res.IsError {
		t.Fatalf("an error result without an error: %s", res.Text())
	}
	return res.Text(), nil
}

// toolCase is one call of a file tool.
type toolCase struct {
	name string
	args map[string]any
	want string
	// wantIs and wantMsg, when set, describe the expected error.
	wantIs  error
	wantMsg string
}

func runCases(t *testing.T, tl tool.Tool, tests []toolCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := call(t, tl, tt.args)
			if tt.wantIs != nil || tt.wantMsg != "" {
				if err == nil {
					t.Fatalf("got %q, want an error", got)
				}
				if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
					t.Errorf("error %q does not match %q", err, tt.wantIs)
				}
				if !strings.Contains(err.Error(), tt.wantMsg) {
					t.Errorf("error %q does not contain %q", err, tt.wantMsg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
		})
	}
}

func mustTool(t *testing.T, mk func(string, *builtin.Options) (tool.Tool, error), root string, opts *builtin.Options) tool.Tool {
	t.Helper()
	tl, err := mk(root, opts)
	if err != nil {
		t.Fatal(err)
	}
	return tl
}

func TestReadOnly(t *testing.T) {
	tools, err := builtin.ReadOnly(newTree(t))
	if err != nil {
		t.Fatal(err)
	}
	set, err := tool.NewSet(tools...)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"read_file", "list_dir", "glob", "grep"}, set.Names()); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
	for _, d := range set.Definitions() {
		if d.Description == "" || !json.Valid(d.Parameters) {
			t.Errorf("%s: description %q, parameters %s", d.Name, d.Description, d.Parameters)
		}
	}

	for _, bad := range []string{filepath.Join(t.TempDir(), "missing"), filepath.Join(newTree(t), "a.txt")} {
		if _, err := builtin.ReadOnly(bad); err == nil {
			t.Errorf("ReadOnly(%q) gave no error", bad)
		}
	}
}

func TestReadFile(t *testing.T) {
	root := newTree(t)
	tl := mustTool(t, builtin.ReadFile, root, nil)
	abc := "     1\talpha\n     2\tbeta\n     3\tgamma\n"
	runCases(t, tl, []toolCase{
		{name: "whole file", args: map[string]any{"path": "a.txt"}, want: abc},
		{name: "offset and limit", args: map[string]any{"path": "a.txt", "offset": 2, "limit": 1},
			want: "     2\tbeta\n[the file goes on: read on with offset=3]\n"},
		{name: "limit to the end", args: map[string]any{"path": "a.txt", "offset": 2, "limit": 2},
			want: "     2\tbeta\n     3\tgamma\n"},
		{name: "last line", args: map[string]any{"path": "a.txt", "offset": 3}, want: "     3\tgamma\n"},
		{name: "just past the end", args: map[string]any{"path": "a.txt", "offset": 4}, wantMsg: "has 3 lines"},
		{name: "far past the end", args: map[string]any{"path": "a.txt", "offset": 99}, wantMsg: "has 3 lines"},
		{name: "negative offset", args: map[string]any{"path": "a.txt", "offset": -1}, wantMsg: "negative"},
		{name: "CRLF", args: map[string]any{"path": "crlf.txt"}, want: "     1\tone\n     2\ttwo\n"},
		{name: "no final newline", args: map[string]any{"path": "noeol.txt"}, want: "     1\tlast line\n"},
		{name: "empty", args: map[string]any{"path": "empty.txt"}, want: `("empty.txt" is empty)`},
		{name: "nested", args: map[string]any{"path": "src/util/notes.md"}, want: "     1\tnotes\n"},
		{name: "cleaned path", args: map[string]any{"path": "src/../a.txt"}, want: abc},
		{name: "absolute path inside", args: map[string]any{"path": filepath.Join(root, "a.txt")}, want: abc},
		{name: "symbolic link inside", args: map[string]any{"path": "link_in"}, want: abc},
		{name: "missing", args: map[string]any{"path": "nope.txt"}, wantIs: fs.ErrNotExist, wantMsg: `"nope.txt"`},
		{name: "missing argument", args: map[string]any{}, wantMsg: `missing properties: ["path"]`},
		{name: "directory", args: map[string]any{"path": "src"}, wantMsg: "is a directory"},
		{name: "binary", args: map[string]any{"path": "bin.dat"}, wantIs: builtin.ErrBinary},
		{name: "parent", args: map[string]any{"path": "../etc/passwd"}, wantIs: builtin.ErrOutsideRoot},
		{name: "parent after a directory", args: map[string]any{"path": "src/../../x"}, wantIs: builtin.ErrOutsideRoot},
		{name: "absolute path outside", args: map[string]any{"path": "/etc/passwd"}, wantIs: builtin.ErrOutsideRoot},
		{name: "link to a file outside", args: map[string]any{"path": "link_out"}, wantIs: builtin.ErrOutsideRoot, wantMsg: "symbolic link"},
		{name: "through a link to a directory outside", args: map[string]any{"path": "link_outdir/secret.txt"}, wantIs: builtin.ErrOutsideRoot},
		{name: "through a link to the parent", args: map[string]any{"path": "link_up/etc/passwd"}, wantIs: builtin.ErrOutsideRoot},
		{name: "git directory", args: map[string]any{"path": ".git/config"}, wantIs: builtin.ErrGitDir},
	})
}

func TestReadFileLimits(t *testing.T) {
	root := t.TempDir()
	var lines []string
	for i := range 40 {
		lines = append(lines, strings.Repeat(string(rune('a'+i%26)), i%7))
	}
	write(t, filepath.Join(root, "f.txt"), strings.Join(lines, "\n")+"\n")
	write(t, filepath.Join(root, "long.txt"), strings.Repeat("x", 50)+"\nnext\n")
	tl := mustTool(t, builtin.ReadFile, root, &builtin.Options{MaxFileBytes: 16})

	// Reading on from each continuation note yields every line once, and
	// no call returns more than the limit.
	var got []string
	offset, calls := 1, 0
	for ; calls < 100; calls++ {
		out, err := call(t, tl, map[string]any{"path": "f.txt", "offset": offset})
		if err != nil {
			t.Fatal(err)
		}
		content := 0
		next := 0
		for l := range strings.Lines(out) {
			if _, err := fmt.Sscanf(l, "[stopped at the limit of 16 bytes: read on with offset=%d]", &next); err == nil {
				continue
			}
			_, text, ok := strings.Cut(strings.TrimSuffix(l, "\n"), "\t")
			if !ok {
				t.Fatalf("unexpected line %q", l)
			}
			got = append(got, text)
			content += len(text) + 1
		}
		if content > 16 {
			t.Errorf("a call returned %d bytes of content, over the limit", content)
		}
		if next == 0 {
			break
		}
		offset = next
	}
	if diff := cmp.Diff(lines, got); diff != "" {
		t.Errorf("lines read in %d calls (-want +got):\n%s", calls+1, diff)
	}

	out, err := call(t, tl, map[string]any{"path": "long.txt"})
	if err != nil {
		t.Fatal(err)
	}
	want := "     1\t" + strings.Repeat("x", 16) + "\n[line 1 is longer than the limit of 16 bytes and was cut; read on with offset=2]\n"
	if out != want {
		t.Errorf("long line: got %q, want %q", out, want)
	}
}

func TestListDir(t *testing.T) {
	root := newTree(t)
	tl := mustTool(t, builtin.ListDir, root, nil)
	outside := filepath.Dir(mustReadlink(t, filepath.Join(root, "link_out")))
	runCases(t, tl, []toolCase{
		{name: "root", args: map[string]any{}, want: "a.txt (17 bytes)\nbin.dat (11 bytes)\ncrlf.txt (10 bytes)\n" +
			"docs/\nempty.txt (0 bytes)\nlink_in -> a.txt\nlink_out -> " + filepath.Join(outside, "secret.txt") + "\n" +
			"link_outdir -> " + outside + "\nlink_src -> src\nlink_up -> ../\nnoeol.txt (9 bytes)\nsrc/\n"},
		{name: "subdirectory", args: map[string]any{"path": "src"}, want: "main.go (48 bytes)\nutil/\n"},
		{name: "dot", args: map[string]any{"path": "src/util/."}, want: "helper.go (33 bytes)\nnotes.md (6 bytes)\n"},
		{name: "link to a directory inside", args: map[string]any{"path": "link_src"}, want: "main.go (48 bytes)\nutil/\n"},
		{name: "file", args: map[string]any{"path": "a.txt"}, wantMsg: "not a directory"},
		{name: "missing", args: map[string]any{"path": "nope"}, wantIs: fs.ErrNotExist},
		{name: "parent", args: map[string]any{"path": ".."}, wantIs: builtin.ErrOutsideRoot},
		{name: "absolute path outside", args: map[string]any{"path": "/etc"}, wantIs: builtin.ErrOutsideRoot},
		{name: "link to a directory outside", args: map[string]any{"path": "link_outdir"}, wantIs: builtin.ErrOutsideRoot},
		{name: "git directory", args: map[string]any{"path": ".git"}, wantIs: builtin.ErrGitDir},
	})

	empty := t.TempDir()
	if err := os.Mkdir(filepath.Join(empty, "e"), 0o755); err != nil {
		t.Fatal(err)
	}
	runCases(t, mustTool(t, builtin.ListDir, empty, nil), []toolCase{
		{name: "empty", args: map[string]any{"path": "e"}, want: `("e" is an empty directory)`},
	})
	runCases(t, mustTool(t, builtin.ListDir, root, &builtin.Options{MaxResults: 2}), []toolCase{
		{name: "limit", args: map[string]any{}, want: "a.txt (17 bytes)\nbin.dat (11 bytes)\n[10 more entries not shown]\n"},
	})
}

func mustReadlink(t *testing.T, p string) string {
	t.Helper()
	target, err := os.Readlink(p)
	if err != nil {
		t.Fatal(err)
	}
	return target
}

func TestGlob(t *testing.T) {
	root := newTree(t)
	tl := mustTool(t, builtin.Glob, root, nil)
	runCases(t, tl, []toolCase{
		{name: "base name at any depth", args: map[string]any{"pattern": "*.go"}, want: "src/main.go\nsrc/util/helper.go\n"},
		{name: "one directory", args: map[string]any{"pattern": "src/*.go"}, want: "src/main.go\n"},
		{name: "double star", args: map[string]any{"pattern": "**/*.md"}, want: "docs/guide.md\nsrc/util/notes.md\n"},
		{name: "double star in the middle", args: map[string]any{"pattern": "src/**/*.go"}, want: "src/main.go\nsrc/util/helper.go\n"},
		{name: "everything under", args: map[string]any{"pattern": "src/**"}, want: "src/\nsrc/main.go\nsrc/util/\nsrc/util/helper.go\nsrc/util/notes.md\n"},
		{name: "directories", args: map[string]any{"pattern": "*/"}, want: "docs/\nsrc/\nsrc/util/\n"},
		{name: "in a path", args: map[string]any{"pattern": "*.go", "path": "src/util"}, want: "src/util/helper.go\n"},
		{name: "character class", args: map[string]any{"pattern": "[ab]*.*"}, want: "a.txt\nbin.dat\n"},
		{name: "git is skipped", args: map[string]any{"pattern": "config"}, want: `no paths match "config"`},
		{name: "directories only, under a path", args: map[string]any{"pattern": "**/", "path": "src"}, want: "src/util/\n"},
		{name: "links met are not followed", args: map[string]any{"pattern": "**/main.go"}, want: "src/main.go\n"},
		{name: "a link named in the pattern is", args: map[string]any{"pattern": "link_src/*.go"}, want: "link_src/main.go\n"},
		{name: "no match", args: map[string]any{"pattern": "*.rs"}, want: `no paths match "*.rs"`},
		{name: "missing literal directory", args: map[string]any{"pattern": "nope/*.go"}, want: `no paths match "nope/*.go"`},
		{name: "parent in pattern", args: map[string]any{"pattern": "../*"}, wantIs: builtin.ErrOutsideRoot},
		{name: "absolute pattern", args: map[string]any{"pattern": "/etc/*"}, wantMsg: "must be relative"},
		{name: "bad pattern", args: map[string]any{"pattern": "[a"}, wantMsg: "syntax error in pattern"},
		{name: "parent path", args: map[string]any{"pattern": "*", "path": ".."}, wantIs: builtin.ErrOutsideRoot},
		{name: "link to a directory outside", args: map[string]any{"pattern": "link_outdir/*"}, wantIs: builtin.ErrOutsideRoot},
		{name: "missing path", args: map[string]any{"pattern": "*", "path": "nope"}, wantIs: fs.ErrNotExist},
		{name: "file as path", args: map[string]any{"pattern": "*", "path": "a.txt"}, wantMsg: "not a directory"},
	})
	runCases(t, mustTool(t, builtin.Glob, root, &builtin.Options{MaxResults: 1}), []toolCase{
		{name: "limit", args: map[string]any{"pattern": "*.go"}, want: "src/main.go\n[stopped after 1 paths: narrow the pattern]\n"},
	})
	runCases(t, mustTool(t, builtin.Glob, root, &builtin.Options{MaxVisited: 3}), []toolCase{
		{name: "visit limit", args: map[string]any{"pattern": "*.txt"},
			want: "a.txt\n[stopped after visiting 3 entries: narrow the pattern or the path]\n"},
	})
}

func TestGrep(t *testing.T) {
	root := newTree(t)
	tl := mustTool(t, builtin.Grep, root, nil)
	runCases(t, tl, []toolCase{
		{name: "everywhere", args: map[string]any{"pattern": "hello"},
			want: "docs/guide.md:2:hello world\nsrc/main.go:4:\tprintln(\"hello\")\n"},
		{name: "ignore case", args: map[string]any{"pattern": "HELLO", "ignore_case": true},
			want: "docs/guide.md:2:hello world\nsrc/main.go:4:\tprintln(\"hello\")\nsrc/util/helper.go:3:// TODO: say Hello\n"},
		{name: "case matters", args: map[string]any{"pattern": "Hello"}, want: "src/util/helper.go:3:// TODO: say Hello\n"},
		{name: "regular expression", args: map[string]any{"pattern": `^package \w+$`},
			want: "src/main.go:1:package main\nsrc/util/helper.go:1:package util\n"},
		{name: "glob", args: map[string]any{"pattern": "hello", "glob": "*.md"}, want: "docs/guide.md:2:hello world\n"},
		{name: "glob with a directory", args: map[string]any{"pattern": "package", "glob": "util/*.go", "path": "src"},
			want: "src/util/helper.go:1:package util\n"},
		{name: "one file", args: map[string]any{"pattern": "a", "path": "a.txt"}, want: "a.txt:1:alpha\na.txt:2:beta\na.txt:3:gamma\n"},
		{name: "link inside", args: map[string]any{"pattern": "beta", "path": "link_in"}, want: "link_in:2:beta\n"},
		{name: "no match", args: map[string]any{"pattern": "zebra"}, want: "no matches"},
		{name: "binary file", args: map[string]any{"pattern": "hello", "path": "bin.dat"}, want: `"bin.dat" is a binary file: not searched`},
		{name: "bad expression", args: map[string]any{"pattern": "(a"}, wantMsg: "invalid regular expression"},
		{name: "empty pattern", args: map[string]any{"pattern": ""}, wantMsg: "empty pattern"},
		{name: "bad glob", args: map[string]any{"pattern": "a", "glob": "[a"}, wantMsg: "syntax error in pattern"},
		{name: "parent", args: map[string]any{"pattern": "root", "path": "../"}, wantIs: builtin.ErrOutsideRoot},
		{name: "absolute path outside", args: map[string]any{"pattern": "root", "path": "/etc/passwd"}, wantIs: builtin.ErrOutsideRoot},
		{name: "link outside", args: map[string]any{"pattern": "hello", "path": "link_out"}, wantIs: builtin.ErrOutsideRoot},
		{name: "link to a directory outside", args: map[string]any{"pattern": "hello", "path": "link_outdir"}, wantIs: builtin.ErrOutsideRoot},
		{name: "missing", args: map[string]any{"pattern": "a", "path": "nope"}, wantIs: fs.ErrNotExist},
		{name: "git directory", args: map[string]any{"pattern": "a", "path": ".git"}, wantIs: builtin.ErrGitDir},
	})
	runCases(t, mustTool(t, builtin.Grep, root, &builtin.Options{MaxMatches: 1}), []toolCase{
		{name: "match limit", args: map[string]any{"pattern": "hello"},
			want: "docs/guide.md:2:hello world\n[stopped after 1 matches: narrow the pattern, the path or the glob]\n"},
	})
	runCases(t, mustTool(t, builtin.Grep, root, &builtin.Options{MaxFileBytes: 8}), []toolCase{
		// Only "alpha\nbe" of a.txt is searched.
		{name: "file limit", args: map[string]any{"pattern": "a", "path": "a.txt"},
			want: "a.txt:1:alpha\n[1 large files were searched only in their first 8 bytes]\n"},
	})
}

func TestGrepLongLine(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "min.js"), "var a=1;"+strings.Repeat("x", 1000)+"needle\n")
	out, err := call(t, mustTool(t, builtin.Grep, root, nil), map[string]any{"pattern": "needle"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(out, " [line cut]\n") || len(out) > 600 {
		t.Errorf("a long matching line was not cut: %d bytes, %q...", len(out), out[:min(len(out), 40)])
	}
}

func TestCanceled(t *testing.T) {
	tools, err := builtin.ReadOnly(newTree(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tl := range tools {
		if _, err := tl.Call(ctx, json.RawMessage(`{"path":"a.txt","pattern":"a"}`)); err == nil {
			t.Errorf("%s ran with a canceled context", tl.Definition().Name)
		}
	}
}

func TestReadOnlyToolsAreReads(t *testing.T) {
	tools, err := builtin.ReadOnly(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range tools {
		if k := tool.KindOf(tl); k != tool.KindRead {
			t.Errorf("%s is %q, want %q", tl.Definition().Name, k, tool.KindRead)
		}
	}
}
