package builtin

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"regexp"
	"strings"

	"github.com/calf-go/calf/tool"
)

// maxShownLine bounds the bytes of a matching line grep shows.
const maxShownLine = 500

type grepArgs struct {
	Pattern    string `json:"pattern" jsonschema:"a regular expression in Go (RE2) syntax"`
	Path       string `json:"path,omitempty" jsonschema:"the file or directory to search, relative to the working directory; default the working directory itself"`
	Glob       string `json:"glob,omitempty" jsonschema:"search only the files whose path matches this glob, such as *.go (at any depth) or cmd/**/*.go"`
	IgnoreCase bool   `json:"ignore_case,omitempty" jsonschema:"match letters regardless of case"`
}

// Grep returns the grep tool, which searches the text files beneath root for
// lines matching a regular expression (RE2 syntax). It returns
// "path:line:text" lines, at most opts.MaxMatches of them; it skips binary
// files (those with a NUL byte in their first 8000 bytes), files that are
// not regular, .git, and searches at most opts.MaxFileBytes of each file.
// Its glob argument filters files as the glob tool's pattern does.
func Grep(root string, opts *Options) (tool.Tool, error) {
	r, err := newRoot(root, opts)
	if err != nil {
		return nil, err
	}
	desc := fmt.Sprintf("Search the text files of the working directory for lines matching a regular "+
		"expression (Go RE2 syntax). Returns path:line:text lines, at most %d. Binary files are skipped.",
		r.opts.MaxMatches)
	return classify(tool.KindRead)(tool.New("grep", desc, r.grep))
}

type grepState struct {
	re       *regexp.Regexp
	out      strings.Builder
	matches  int
	more     bool
	partial  int
	binaries int
	buf      []byte
}

func (r *fsRoot) grep(ctx context.Context, in grepArgs) (string, error) {
	if in.Pattern == "" {
		return "", errors.New("empty pattern")
	}
	expr := in.Pattern
	if in.IgnoreCase {
		expr = "(?i)" + expr
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return "", fmt.Errorf("invalid regular expression: %w", err)
	}
	var filter *pattern
	if in.Glob != "" {
		if filter, err = parsePattern(in.Glob); err != nil {
			return "", err
		}
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
	fi, err := root.Stat(p)
	if err != nil {
		return "", pathError(p, err)
	}
	st := &grepState{re: re}
	var capped bool
	if !fi.IsDir() {
		if !fi.Mode().IsRegular() {
			return "", fmt.Errorf("%q is not a regular file", display(p))
		}
		if err := r.grepFile(ctx, root, display(p), st); err != nil {
			return "", err
		}
	} else {
		base := display(p)
		capped, err = r.walk(ctx, root, base, func(fp string, d fs.DirEntry) error {
			if d.IsDir() || st.more {
				return nil
			}
			if filter != nil {
				rel := fp
				if base != "." {
					rel = strings.TrimPrefix(fp, base+"/")
				}
				if !filter.match(rel, false) {
					return nil
				}
			}
			if !d.Type().IsRegular() {
				// A symbolic link: search its target if it is a regular
				// file beneath the root.
				if d.Type()&fs.ModeSymlink == 0 {
					return nil
				}
				if fi, err := root.Stat(fp); err != nil || !fi.Mode().IsRegular() {
					return nil
				}
			}
			if err := r.grepFile(ctx, root, fp, st); err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				return nil // an unreadable file: skip it
			}
			if st.more {
				return errStopWalk
			}
			return nil
		})
		if err != nil {
			return "", pathError(p, err)
		}
	}

	out := &st.out
	if st.more {
		fmt.Fprintf(out, "[stopped after %d matches: narrow the pattern, the path or the glob]\n", st.matches)
	}
	if st.partial > 0 {
		fmt.Fprintf(out, "[%d large files were searched only in their first %d bytes]\n", st.partial, r.opts.MaxFileBytes)
	}
	if capped {
		fmt.Fprintf(out, "[stopped after visiting %d entries: narrow the path or the glob]\n", r.opts.MaxVisited)
	}
	if out.Len() == 0 {
		if !fi.IsDir() && st.binaries > 0 {
			return fmt.Sprintf("%q is a binary file: not searched", display(p)), nil
		}
		return "no matches", nil
	}
	return out.String(), nil
}

// grepFile searches the file at the slash-separated root-relative path p.
func (r *fsRoot) grepFile(ctx context.Context, root *os.Root, p string, st *grepState) error {
	f, err := root.Open(p)
	if err != nil {
		return pathError(p, err)
	}
	defer f.Close()
	limit := r.opts.MaxFileBytes
	br := bufio.NewReaderSize(io.LimitReader(f, int64(limit)), 64<<10)
	if bin, err := sniff(br); err != nil {
		return pathError(p, err)
	} else if bin {
		st.binaries++
		return nil
	}
	if fi, err := f.Stat(); err == nil && fi.Size() > int64(limit) {
		st.partial++
	}
	for lineNo := 1; ; lineNo++ {
		if lineNo%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		line, _, err := readLine(br, st.buf, limit)
		st.buf = line
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return pathError(p, err)
		}
		if !st.re.Match(line) {
			continue
		}
		if st.matches == r.opts.MaxMatches {
			st.more = true
			return nil
		}
		st.matches++
		shown, cut := line, ""
		if len(shown) > maxShownLine {
			shown, cut = shown[:maxShownLine], " [line cut]"
		}
		fmt.Fprintf(&st.out, "%s:%d:%s%s\n", p, lineNo, shown, cut)
	}
}
