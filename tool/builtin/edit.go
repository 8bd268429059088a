package builtin

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/aymanbagabas/go-udiff"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/tool"
)

// Errors of the edit tools, returned wrapped with the path.
var (
	// ErrNoMatch is returned by edit_file when old_string does not occur in
	// the file.
	ErrNoMatch = errors.New("old_string was not found")
	// ErrAmbiguous is returned by edit_file when old_string occurs more
	// than once and replace_all is not set.
	ErrAmbiguous = errors.New("old_string is not unique")
	// ErrTooLarge is returned for content or a file over the size limit.
	ErrTooLarge = errors.New("over the size limit")
)

// maxDiffBytes bounds the diff an edit tool returns.
const maxDiffBytes = 16 << 10

// Edit returns the tools that change files beneath root, with the default
// limits: write_file and edit_file. See [EditTools].
func Edit(root string) ([]tool.Tool, error) { return EditTools(root, nil) }

// EditTools returns the tools that change files beneath root: write_file
// and edit_file, with the limits of opts (nil means the defaults). Both are
// of kind [tool.KindEdit]. Like the read-only tools, they reach the root
// through [os.OpenRoot]: a path outside it, through "..", an absolute path
// elsewhere, or a symbolic link that points outside, is refused with
// [ErrOutsideRoot], and .git directories with [ErrGitDir]. They write a
// file whole, through a temporary file renamed over it, so that a reader
// never sees half of it, and keep an existing file's permissions.
func EditTools(root string, opts *Options) ([]tool.Tool, error) {
	var tools []tool.Tool
	for _, mk := range []func(string, *Options) (tool.Tool, error){WriteFile, EditFile} {
		t, err := mk(root, opts)
		if err != nil {
			return nil, err
		}
		tools = append(tools, t)
	}
	return tools, nil
}

type writeFileArgs struct {
	Path    string `json:"path" jsonschema:"the file's path, relative to the working directory"`
	Content string `json:"content" jsonschema:"the file's whole new content"`
}

// WriteFile returns the write_file tool, which creates a file beneath root,
// or replaces one, with the content the model gives, up to
// opts.MaxFileBytes. It creates missing parent directories. Replacing a
// file returns the change as a unified diff.
func WriteFile(root string, opts *Options) (tool.Tool, error) {
	r, err := newRoot(root, opts)
	if err != nil {
		return nil, err
	}
	desc := fmt.Sprintf("Create a file in the working directory, or replace one, with the given content "+
		"(at most %d bytes). Missing directories are created. To change part of a file, use edit_file.", r.opts.MaxFileBytes)
	return classify(tool.KindEdit)(tool.New("write_file", desc, r.writeFile))
}

func (r *fsRoot) writeFile(ctx context.Context, in writeFileArgs) (string, error) {
	p, err := r.rel(in.Path)
	if err != nil {
		return "", err
	}
	if p == "." {
		return "", errors.New("path is empty: name the file to write")
	}
	if len(in.Content) > r.opts.MaxFileBytes {
		return "", fmt.Errorf("%w: the content has %d bytes, and write_file writes at most %d", ErrTooLarge, len(in.Content), r.opts.MaxFileBytes)
	}
	root, err := r.open()
	if err != nil {
		return "", err
	}
	defer root.Close()
	old, mode, exists, err := r.current(root, p)
	if err != nil {
		return "", err
	}
	if !exists {
		if dir := filepath.Dir(p); dir != "." {
			if err := root.MkdirAll(dir, 0o755); err != nil {
				return "", pathError(dir, err)
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if err := replace(root, p, []byte(in.Content), mode); err != nil {
		return "", err
	}
	if !exists {
		return fmt.Sprintf("Created %q (%d bytes).", display(p), len(in.Content)), nil
	}
	if string(old) == in.Content {
		return fmt.Sprintf("%q already had this content; nothing changed.", display(p)), nil
	}
	return fmt.Sprintf("Replaced %q (%d bytes):\n%s", display(p), len(in.Content), diff(p, string(old), in.Content)), nil
}

type editFileArgs struct {
	Path       string `json:"path" jsonschema:"the file's path, relative to the working directory"`
	OldString  string `json:"old_string" jsonschema:"the exact text to replace, with enough surrounding lines to occur only once in the file"`
	NewString  string `json:"new_string" jsonschema:"the text to put in its place"`
	ReplaceAll bool   `json:"replace_all,omitempty" jsonschema:"replace every occurrence of old_string rather than require exactly one"`
}

// EditFile returns the edit_file tool, which replaces an exact string in a
// text file beneath root: old_string must occur exactly once (or, with
// replace_all, at least once), so that the model says unambiguously what it
// changes. It returns the change as a unified diff. Files over
// opts.MaxFileBytes and binary files are refused.
func EditFile(root string, opts *Options) (tool.Tool, error) {
	r, err := newRoot(root, opts)
	if err != nil {
		return nil, err
	}
	desc := fmt.Sprintf("Edit a text file in the working directory by replacing old_string, which must occur "+
		"exactly once in the file (include surrounding lines to make it unique), with new_string; set "+
		"replace_all to replace every occurrence. Copy old_string exactly, whitespace included, from "+
		"read_file's output without the line numbers. Returns a diff of the change. Files over %d bytes "+
		"cannot be edited.", r.opts.MaxFileBytes)
	return classify(tool.KindEdit)(tool.New("edit_file", desc, r.editFile))
}

func (r *fsRoot) editFile(ctx context.Context, in editFileArgs) (string, error) {
	if in.OldString == "" {
		return "", errors.New("old_string is empty: give the text to replace (to create a file, use write_file)")
	}
	if in.OldString == in.NewString {
		return "", errors.New("old_string and new_string are the same: nothing would change")
	}
	p, err := r.rel(in.Path)
	if err != nil {
		return "", err
	}
	root, err := r.open()
	if err != nil {
		return "", err
	}
	defer root.Close()
	data, mode, exists, err := r.current(root, p)
	if err != nil {
		return "", err
	}
	if !exists {
		return "", fmt.Errorf("%q: %w (to create it, use write_file)", display(p), fs.ErrNotExist)
	}
	if isBinary(data[:min(len(data), sniffLen)]) {
		return "", fmt.Errorf("%w: %q is not a text file", ErrBinary, display(p))
	}
	old := string(data)
	n := strings.Count(old, in.OldString)
	switch {
	case n == 0:
		return "", fmt.Errorf("%w in %q: check it against the file's current content (read_file), whitespace and line breaks included", ErrNoMatch, display(p))
	case n > 1 && !in.ReplaceAll:
		return "", fmt.Errorf("%w: it occurs %d times in %q; include more surrounding lines to pick one, or set replace_all to replace them all", ErrAmbiguous, n, display(p))
	}
	updated := strings.ReplaceAll(old, in.OldString, in.NewString)
	if len(updated) > r.opts.MaxFileBytes {
		return "", fmt.Errorf("%w: the edit would make %q %d bytes long, over the limit of %d", ErrTooLarge, display(p), len(updated), r.opts.MaxFileBytes)
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if err := replace(root, p, []byte(updated), mode); err != nil {
		return "", err
	}
	what := "1 occurrence"
	if n > 1 {
		what = fmt.Sprintf("%d occurrences", n)
	}
	return fmt.Sprintf("Edited %q (%s replaced):\n%s", display(p), what, diff(p, old, updated)), nil
}

// current returns the content and permissions of the file p beneath root,
// if it exists. It refuses what is not a regular file within the size
// limit, and a symbolic link (whose target, if inside the root, is the path
// to give).
func (r *fsRoot) current(root *os.Root, p string) (data []byte, mode fs.FileMode, exists bool, err error) {
	fi, err := root.Lstat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// A parent may still be a link leading outside: Stat of the parent
		// says so, rather than a later write.
		if dir := filepath.Dir(p); dir != "." {
			if _, err := root.Stat(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, 0, false, pathError(dir, err)
			}
		}
		return nil, 0o644, false, nil
	case err != nil:
		return nil, 0, false, pathError(p, err)
	case fi.Mode()&fs.ModeSymlink != 0:
		return nil, 0, false, fmt.Errorf("%q is a symbolic link: give the path of the file it points to", display(p))
	case fi.IsDir():
		return nil, 0, false, fmt.Errorf("%q is a directory", display(p))
	case !fi.Mode().IsRegular():
		return nil, 0, false, fmt.Errorf("%q is not a regular file", display(p))
	case fi.Size() > int64(r.opts.MaxFileBytes):
		return nil, 0, false, fmt.Errorf("%w: %q has %d bytes, over the limit of %d", ErrTooLarge, display(p), fi.Size(), r.opts.MaxFileBytes)
	}
	data, err = root.ReadFile(p)
	if err != nil {
		return nil, 0, false, pathError(p, err)
	}
	return data, fi.Mode().Perm(), true, nil
}

// replace writes data to p beneath root through a temporary file in the
// same directory, renamed over p.
func replace(root *os.Root, p string, data []byte, mode fs.FileMode) error {
	tmp := filepath.Join(filepath.Dir(p), ".calf-"+calf.NewID()[:12]+".tmp")
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return pathError(p, err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		// OpenFile's mode passed through the umask.
		err = root.Chmod(tmp, mode)
	}
	if err == nil {
		err = root.Rename(tmp, p)
	}
	if err != nil {
		_ = root.Remove(tmp)
		return pathError(p, err)
	}
	return nil
}

// diff returns the unified diff from old to new of the file p, cut at
// maxDiffBytes.
func diff(p, old, new string) string {
	d := udiff.Unified("a/"+display(p), "b/"+display(p), old, new)
	if len(d) > maxDiffBytes {
		cut := strings.LastIndexByte(d[:maxDiffBytes], '\n') + 1
		d = d[:cut] + fmt.Sprintf("[the diff goes on for %d more bytes]\n", len(d)-cut)
	}
	return d
}
