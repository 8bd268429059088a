package builtin

import (
	"context"
	"errors"
	"io/fs"
	"os"
)

// errStopWalk ends a walk early without an error.
var errStopWalk = errors.New("stop walk")

// walk visits the entries beneath start (a slash-separated path relative
// to the root, start included) in lexical order. It skips .git directories
// and entries that cannot be read, does not follow symbolic links to
// directories, and stops after opts.MaxVisited entries, reporting it with
// capped. visit may return fs.SkipDir, or errStopWalk to end the walk.
func (r *fsRoot) walk(ctx context.Context, root *os.Root, start string, visit func(p string, d fs.DirEntry) error) (capped bool, err error) {
	visited := 0
	err = fs.WalkDir(root.FS(), start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == start {
				return err
			}
			return nil // an unreadable entry: skip it
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return fs.SkipDir
		}
		if visited++; visited > r.opts.MaxVisited {
			capped = true
			return errStopWalk
		}
		return visit(p, d)
	})
	if errors.Is(err, errStopWalk) {
		err = nil
	}
	return capped, err
}
