package builtin

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"

	"github.com/calf-go/calf/tool"
)

type listDirArgs struct {
	Path string `json:"path,omitempty" jsonschema:"the directory's path, relative to the working directory; default the working directory itself"`
}

// ListDir returns the list_dir tool, which lists a directory beneath root:
// one entry per line, sorted by name, directories with a trailing slash,
// files with their size, symbolic links with their target. It lists at
// most opts.MaxResults entries and leaves out .git.
func ListDir(root string, opts *Options) (tool.Tool, error) {
	r, err := newRoot(root, opts)
	if err != nil {
		return nil, err
	}
	desc := fmt.Sprintf("List a directory in the working directory: one entry per line, directories "+
		"with a trailing slash, files with their size in bytes. At most %d entries.", r.opts.MaxResults)
	return classify(tool.KindRead)(tool.New("list_dir", desc, r.listDir))
}

func (r *fsRoot) listDir(ctx context.Context, in listDirArgs) (string, error) {
	p, err := r.rel(in.Path)
	if err != nil {
		return "", err
	}
	root, err := r.open()
	if err != nil {
		return "", err
	}
	defer root.Close()
	fi, err := root.Stat(p)
	if err != nil {
		return "", pathError(p, err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("%q is not a directory; use read_file to read it", display(p))
	}
	f, err := root.Open(p)
	if err != nil {
		return "", pathError(p, err)
	}
	defer f.Close()
	entries, err := f.ReadDir(-1)
	if err != nil {
		return "", pathError(p, err)
	}
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })

	var out strings.Builder
	shown, skipped := 0, 0
	for _, e := range entries {
		if e.Name() == ".git" {
			continue
		}
		if shown == r.opts.MaxResults {
			skipped++
			continue
		}
		if err := ctx.Err(); err != nil {
			return "", err
		}
		shown++
		switch {
		case e.IsDir():
			fmt.Fprintf(&out, "%s/\n", e.Name())
		case e.Type()&fs.ModeSymlink != 0:
			target, err := root.Readlink(filepath.Join(p, e.Name()))
			if err != nil {
				target = "?"
			}
			fmt.Fprintf(&out, "%s -> %s\n", e.Name(), target)
		default:
			if info, err := e.Info(); err == nil && info.Mode().IsRegular() {
				fmt.Fprintf(&out, "%s (%d bytes)\n", e.Name(), info.Size())
			} else {
				fmt.Fprintf(&out, "%s\n", e.Name())
			}
		}
	}
	if skipped > 0 {
		fmt.Fprintf(&out, "[%d more entries not shown]\n", skipped)
	}
	if out.Len() == 0 {
		return fmt.Sprintf("(%q is an empty directory)", display(p)), nil
	}
	return out.String(), nil
}
