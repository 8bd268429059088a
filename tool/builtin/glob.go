package builtin

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/calf-go/calf/tool"
)

type globArgs struct {
	Pattern string `json:"pattern" jsonschema:"the glob: * and ? match within a name, ** matches any number of directories; a pattern without a slash, such as *.go, matches names at any depth; a trailing slash matches directories only"`
	Path    string `json:"path,omitempty" jsonschema:"the directory to search, relative to the working directory; default the working directory itself"`
}

// Glob returns the glob tool, which finds the files and directories beneath
// root whose path matches a pattern. In a pattern, '*', '?' and '[...]'
// match within a name as in [path.Match], a "**" segment matches any number
// of directories, a pattern without a slash matches names at any depth
// ("*.go"), and one that ends with a slash matches only directories. Paths are returned relative to root, in lexical order,
// directories with a trailing slash, at most opts.MaxResults of them; .git
// is skipped and symbolic links to directories are not followed.
func Glob(root string, opts *Options) (tool.Tool, error) {
	r, err := newRoot(root, opts)
	if err != nil {
		return nil, err
	}
	desc := fmt.Sprintf("Find files in the working directory by name. Examples: \"*.go\" (Go files at any "+
		"depth), \"cmd/*.go\" (directly in cmd), \"docs/**/*.md\" (anywhere under docs). Returns "+
		"matching paths, one per line, at most %d.", r.opts.MaxResults)
	return classify(tool.KindRead)(tool.New("glob", desc, r.glob))
}

func (r *fsRoot) glob(ctx context.Context, in globArgs) (string, error) {
	dir, err := r.rel(in.Path)
	if err != nil {
		return "", err
	}
	pat, err := parsePattern(in.Pattern)
	if err != nil {
		return "", err
	}
	root, err := r.open()
	if err != nil {
		return "", err
	}
	defer root.Close()
	fi, err := root.Stat(dir)
	if err != nil {
		return "", pathError(dir, err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("%q is not a directory", display(dir))
	}
	base := display(dir)
	start := path.Join(base, pat.literalPrefix())
	maxDepth := pat.maxDepth()

	var out strings.Builder
	found, more := 0, false
	capped, err := r.walk(ctx, root, start, func(p string, d fs.DirEntry) error {
		if p == base {
			return nil
		}
		rel := p
		if base != "." {
			rel = strings.TrimPrefix(p, base+"/")
		}
		if pat.match(rel, d.IsDir()) {
			if found == r.opts.MaxResults {
				more = true
				return errStopWalk
			}
			found++
			out.WriteString(p)
			if d.IsDir() {
				out.WriteByte('/')
			}
			out.WriteByte('\n')
		}
		if d.IsDir() && maxDepth >= 0 && strings.Count(rel, "/")+1 >= maxDepth {
			return fs.SkipDir
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		err = nil // the pattern's literal directory does not exist
	}
	if err != nil {
		return "", pathError(start, err)
	}
	if more {
		fmt.Fprintf(&out, "[stopped after %d paths: narrow the pattern]\n", found)
	}
	if capped {
		fmt.Fprintf(&out, "[stopped after visiting %d entries: narrow the pattern or the path]\n", r.opts.MaxVisited)
	}
	if out.Len() == 0 {
		return fmt.Sprintf("no paths match %q", in.Pattern), nil
	}
	return out.String(), nil
}
