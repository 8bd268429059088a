package builtin_test

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/calf-go/calf/tool"
	"github.com/calf-go/calf/tool/builtin"
)

// editTools returns write_file and edit_file over a new tree (see newTree),
// with opts.
func editTools(t *testing.T, opts *builtin.Options) (root string, write, edit tool.Tool) {
	t.Helper()
	root = newTree(t)
	tools, err := builtin.EditTools(root, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(tools) != 2 || tools[0].Definition().Name != "write_file" || tools[1].Definition().Name != "edit_file" {
		t.Fatalf("EditTools returned %d tools", len(tools))
	}
	for _, tl := range tools {
		if k := tool.KindOf(tl); k != tool.KindEdit {
			t.Errorf("%s is %q, want %q", tl.Definition().Name, k, tool.KindEdit)
		}
	}
	return root, tools[0], tools[1]
}

func readBack(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestWriteFile(t *testing.T) {
	root, write, _ := editTools(t, nil)

	// A new file, in a new directory.
	out, err := call(t, write, map[string]any{"path": "new/dir/x.txt", "content": "one\ntwo\n"})
	if err != nil || !strings.Contains(out, "Created") {
		t.Fatalf("create = %q, %v", out, err)
	}
	if got := readBack(t, filepath.Join(root, "new/dir/x.txt")); got != "one\ntwo\n" {
		t.Errorf("created file holds %q", got)
	}

	// Replacing a file returns a diff and keeps its permissions.
	if err := os.Chmod(filepath.Join(root, "a.txt"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err = call(t, write, map[string]any{"path": "a.txt", "content": "alpha\nBETA\ngamma\n"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"--- a/a.txt", "+++ b/a.txt", "-beta", "+BETA"} {
		if !strings.Contains(out, want) {
			t.Errorf("replace result lacks %q:\n%s", want, out)
		}
	}
	fi, err := os.Stat(filepath.Join(root, "a.txt"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("a.txt after the write: %v, %v; want mode 0600", fi.Mode(), err)
	}
	// No temporary file is left behind.
	entries, _ := os.ReadDir(root)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".calf-") {
			t.Errorf("temporary file %s left in the root", e.Name())
		}
	}
	// Writing through a link to a directory inside the root is fine.
	if _, err := call(t, write, map[string]any{"path": "link_src/new.go", "content": "package main\n"}); err != nil {
		t.Errorf("write through link_src: %v", err)
	}
	if got := readBack(t, filepath.Join(root, "src/new.go")); got != "package main\n" {
		t.Errorf("src/new.go holds %q", got)
	}
}

func TestWriteFileRefuses(t *testing.T) {
	root, write, _ := editTools(t, &builtin.Options{MaxFileBytes: 64})
	outside := filepath.Dir(readLink(t, filepath.Join(root, "link_out")))
	for _, tt := range []struct {
		name, path, content string
		want                error
		wantText            string
	}{
		{"dot-dot", "../escape.txt", "x", builtin.ErrOutsideRoot, ""},
		{"deep dot-dot", "src/../../escape.txt", "x", builtin.ErrOutsideRoot, ""},
		{"absolute elsewhere", filepath.Join(outside, "abs.txt"), "x", builtin.ErrOutsideRoot, ""},
		{"link to a file outside", "link_out", "x", nil, "symbolic link"},
		{"through a link to a directory outside", "link_outdir/planted.txt", "x", builtin.ErrOutsideRoot, ""},
		{"through a link upwards", "link_up/planted.txt", "x", builtin.ErrOutsideRoot, ""},
		{"git", ".git/hooks/pre-commit", "x", builtin.ErrGitDir, ""},
		{"directory", "src", "x", nil, "is a directory"},
		{"empty path", "", "x", nil, "path is empty"},
		{"too large", "big.txt", strings.Repeat("x", 65), builtin.ErrTooLarge, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := call(t, write, map[string]any{"path": tt.path, "content": tt.content})
			if err == nil {
				t.Fatal("write succeeded")
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("error %v, want %v", err, tt.want)
			}
			if tt.wantText != "" && !strings.Contains(err.Error(), tt.wantText) {
				t.Errorf("error %v, want it to say %q", err, tt.wantText)
			}
		})
	}
	// Nothing was written outside, and the secret is intact.
	for _, name := range []string{"escape.txt", "abs.txt", "planted.txt"} {
		if _, err := os.Stat(filepath.Join(outside, name)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s was written outside the root: %v", name, err)
		}
		if _, err := os.Stat(filepath.Join(filepath.Dir(root), name)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s was written next to the root: %v", name, err)
		}
	}
	if got := readBack(t, filepath.Join(outside, "secret.txt")); got != "hello secret\n" {
		t.Errorf("the file outside holds %q", got)
	}
}

func readLink(t *testing.T, path string) string {
	t.Helper()
	target, err := os.Readlink(path)
	if err != nil {
		t.Fatal(err)
	}
	return target
}

func TestEditFile(t *testing.T) {
	root, _, edit := editTools(t, nil)
	out, err := call(t, edit, map[string]any{"path": "src/main.go", "old_string": `println("hello")`, "new_string": `println("goodbye")`})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"1 occurrence", `-	println("hello")`, `+	println("goodbye")`, "@@"} {
		if !strings.Contains(out, want) {
			t.Errorf("edit result lacks %q:\n%s", want, out)
		}
	}
	if got := readBack(t, filepath.Join(root, "src/main.go")); got != "package main\n\nfunc main() {\n\tprintln(\"goodbye\")\n}\n" {
		t.Errorf("edited file holds %q", got)
	}

	// replace_all replaces every occurrence; CRLF line endings stay.
	write(t, filepath.Join(root, "many.txt"), "x = 1\r\nx = 2\r\nx = 3\r\n")
	out, err = call(t, edit, map[string]any{"path": "many.txt", "old_string": "x =", "new_string": "y =", "replace_all": true})
	if err != nil || !strings.Contains(out, "3 occurrences") {
		t.Fatalf("replace_all = %q, %v", out, err)
	}
	if got := readBack(t, filepath.Join(root, "many.txt")); got != "y = 1\r\ny = 2\r\ny = 3\r\n" {
		t.Errorf("after replace_all: %q", got)
	}
}

func TestEditFileRefuses(t *testing.T) {
	root, _, edit := editTools(t, &builtin.Options{MaxFileBytes: 200})
	write(t, filepath.Join(root, "dup.txt"), "same\nother\nsame\n")
	write(t, filepath.Join(root, "large.txt"), strings.Repeat("x", 201))
	write(t, filepath.Join(root, "grow.txt"), "seed\n")
	for _, tt := range []struct {
		name     string
		args     map[string]any
		want     error
		wantText string
	}{
		{"missing string", map[string]any{"path": "a.txt", "old_string": "delta", "new_string": "x"}, builtin.ErrNoMatch, "read_file"},
		{"ambiguous string", map[string]any{"path": "dup.txt", "old_string": "same", "new_string": "x"}, builtin.ErrAmbiguous, "2 times"},
		{"empty old_string", map[string]any{"path": "a.txt", "old_string": "", "new_string": "x"}, nil, "old_string is empty"},
		{"no change", map[string]any{"path": "a.txt", "old_string": "beta", "new_string": "beta"}, nil, "the same"},
		{"missing file", map[string]any{"path": "nope.txt", "old_string": "a", "new_string": "b"}, fs.ErrNotExist, "write_file"},
		{"binary file", map[string]any{"path": "bin.dat", "old_string": "ab", "new_string": "x"}, builtin.ErrBinary, ""},
		{"file over the limit", map[string]any{"path": "large.txt", "old_string": "x", "new_string": "y", "replace_all": true}, builtin.ErrTooLarge, ""},
		{"edit over the limit", map[string]any{"path": "grow.txt", "old_string": "seed", "new_string": strings.Repeat("y", 300)}, builtin.ErrTooLarge, ""},
		{"dot-dot", map[string]any{"path": "../x", "old_string": "a", "new_string": "b"}, builtin.ErrOutsideRoot, ""},
		{"link outside", map[string]any{"path": "link_outdir/secret.txt", "old_string": "hello", "new_string": "pwned"}, builtin.ErrOutsideRoot, ""},
		{"link to a file outside", map[string]any{"path": "link_out", "old_string": "hello", "new_string": "pwned"}, nil, "symbolic link"},
		{"git", map[string]any{"path": ".git/config", "old_string": "hello", "new_string": "x"}, builtin.ErrGitDir, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := call(t, edit, tt.args)
			if err == nil {
				t.Fatal("edit succeeded")
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("error %v, want %v", err, tt.want)
			}
			if tt.wantText != "" && !strings.Contains(err.Error(), tt.wantText) {
				t.Errorf("error %v, want it to say %q", err, tt.wantText)
			}
		})
	}
	// The refused edits changed nothing.
	for name, want := range map[string]string{"a.txt": "alpha\nbeta\ngamma\n", "dup.txt": "same\nother\nsame\n", "grow.txt": "seed\n", ".git/config": "hello from git\n"} {
		if got := readBack(t, filepath.Join(root, name)); got != want {
			t.Errorf("%s holds %q after refused edits", name, got)
		}
	}
	outside := filepath.Dir(readLink(t, filepath.Join(root, "link_out")))
	if got := readBack(t, filepath.Join(outside, "secret.txt")); got != "hello secret\n" {
		t.Errorf("the file outside holds %q", got)
	}
}

// Bad arguments are refused before the tool runs.
func TestEditToolsBadArguments(t *testing.T) {
	_, write, edit := editTools(t, nil)
	var ae *tool.ArgumentError
	if _, err := write.Call(t.Context(), json.RawMessage(`{"path": 3}`)); !errors.As(err, &ae) {
		t.Errorf("write_file with a number for path: %v", err)
	}
	if _, err := edit.Call(t.Context(), json.RawMessage(`{"path": "a.txt"`)); !errors.As(err, &ae) {
		t.Errorf("edit_file with malformed JSON: %v", err)
	}
}
