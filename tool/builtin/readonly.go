package builtin

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/calf-go/calf/tool"
)

// Errors of the file tools. The tools return them, wrapped with the path,
// from their functions; an agent shows their messages to the model, to whom
// the root directory is "the working directory".
var (
	// ErrOutsideRoot is returned for a path that leads outside the root
	// directory: through "..", as an absolute path elsewhere, or through a
	// symbolic link that points outside.
	ErrOutsideRoot = errors.New("path is outside the working directory")
	// ErrGitDir is returned for a path inside a .git directory, which the
	// tools do not read.
	ErrGitDir = errors.New("the .git directory is not accessible")
	// ErrBinary is returned by read_file for a file that is not text.
	ErrBinary = errors.New("binary file")
)

// Defaults of [Options].
const (
	DefaultMaxFileBytes = 256 << 10
	DefaultMaxMatches   = 200
	DefaultMaxResults   = 500
	DefaultMaxVisited   = 100_000
)

// Options sets the limits of the file tools, read-only and edit. The zero value, like a nil
// *Options, means the defaults.
type Options struct {
	// MaxFileBytes bounds the bytes of a file's content that read_file
	// returns in one call and that grep searches in each file, the content
	// write_file writes, and the size of a file edit_file edits, before and
	// after. Default 256 KiB.
	MaxFileBytes int
	// MaxMatches bounds the matching lines grep returns. Default 200.
	MaxMatches int
	// MaxResults bounds the paths glob returns and the entries list_dir
	// returns. Default 500.
	MaxResults int
	// MaxVisited bounds the files and directories glob and grep visit in
	// one call. Default 100,000.
	MaxVisited int
}

func (o *Options) withDefaults() Options {
	var v Options
	if o != nil {
		v = *o
	}
	if v.MaxFileBytes <= 0 {
		v.MaxFileBytes = DefaultMaxFileBytes
	}
	if v.MaxMatches <= 0 {
		v.MaxMatches = DefaultMaxMatches
	}
	if v.MaxResults <= 0 {
		v.MaxResults = DefaultMaxResults
	}
	if v.MaxVisited <= 0 {
		v.MaxVisited = DefaultMaxVisited
	}
	return v
}

// ReadOnly returns the read-only file tools confined to the directory root,
// with the default limits: read_file, list_dir, glob and grep. See
// [ReadOnlyTools].
func ReadOnly(root string) ([]tool.Tool, error) {
	return ReadOnlyTools(root, nil)
}

// ReadOnlyTools returns the read-only file tools confined to the directory
// root: read_file, list_dir, glob and grep, with the limits of opts (nil
// means the defaults).
func ReadOnlyTools(root string, opts *Options) ([]tool.Tool, error) {
	var tools []tool.Tool
	for _, mk := range []func(string, *Options) (tool.Tool, error){ReadFile, ListDir, Glob, Grep} {
		t, err := mk(root, opts)
		if err != nil {
			return nil, err
		}
		tools = append(tools, t)
	}
	return tools, nil
}

// fsRoot is the directory a tool is confined to.
type fsRoot struct {
	dir  string // absolute and clean
	opts Options
}

func newRoot(dir string, opts *Options) (*fsRoot, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("builtin: root %q: %w", dir, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("builtin: root: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("builtin: root %q is not a directory", dir)
	}
	return &fsRoot{dir: abs, opts: opts.withDefaults()}, nil
}

// open opens the root for one call. Every access through the returned
// os.Root stays beneath the directory, symbolic links included.
func (r *fsRoot) open() (*os.Root, error) {
	root, err := os.OpenRoot(r.dir)
	if err != nil {
		return nil, fmt.Errorf("opening the working directory: %w", err)
	}
	return root, nil
}

// rel turns a path given by the model into a clean path relative to the
// root. An empty path is the root itself; an absolute path is accepted when
// it lies beneath the root.
func (r *fsRoot) rel(p string) (string, error) {
	if p == "" {
		return ".", nil
	}
	p = filepath.FromSlash(p)
	if filepath.IsAbs(p) {
		rel, err := filepath.Rel(r.dir, filepath.Clean(p))
		if err != nil || !filepath.IsLocal(rel) {
			return "", fmt.Errorf("%w: %q (use a path relative to the working directory)", ErrOutsideRoot, filepath.ToSlash(p))
		}
		p = rel
	}
	p = filepath.Clean(p)
	if !filepath.IsLocal(p) {
		return "", fmt.Errorf("%w: %q", ErrOutsideRoot, filepath.ToSlash(p))
	}
	if isGitPath(p) {
		return "", fmt.Errorf("%w: %q", ErrGitDir, filepath.ToSlash(p))
	}
	return p, nil
}

func isGitPath(p string) bool {
	for _, seg := range strings.Split(filepath.ToSlash(p), "/") {
		if seg == ".git" {
			return true
		}
	}
	return false
}

// pathError describes err, from an access to the root-relative path p, for
// the model.
func pathError(p string, err error) error {
	shown := filepath.ToSlash(p)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%q: %w", shown, fs.ErrNotExist)
	}
	// os.Root reports an escape with an unexported error.
	if strings.Contains(err.Error(), "path escapes from parent") {
		return fmt.Errorf("%w: %q leads outside it through a symbolic link", ErrOutsideRoot, shown)
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return fmt.Errorf("%q: %w", shown, err)
}

// display returns the root-relative path p as shown to the model.
func display(p string) string { return filepath.ToSlash(p) }

// classify returns a function that declares the kind of the tool a
// constructor returns, passing its error on.
func classify(k tool.Kind) func(tool.Tool, error) (tool.Tool, error) {
	return func(t tool.Tool, err error) (tool.Tool, error) {
		if err != nil {
			return nil, err
		}
		return tool.Classify(t, k), nil
	}
}
