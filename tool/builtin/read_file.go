package builtin

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/calf-go/calf/tool"
)

type readFileArgs struct {
	Path   string `json:"path" jsonschema:"the file's path, relative to the working directory"`
	Offset int    `json:"offset,omitempty" jsonschema:"the number of the first line to read, counting from 1; default 1"`
	Limit  int    `json:"limit,omitempty" jsonschema:"the largest number of lines to read; default: as many as the size limit allows"`
}

// ReadFile returns the read_file tool, which reads a text file beneath root.
// It returns the file's lines numbered from 1 ("     1\tline"), at most
// opts.MaxFileBytes of content per call; the model reads on with the
// offset and limit arguments. It refuses directories, binary files and
// anything that is not a regular file.
func ReadFile(root string, opts *Options) (tool.Tool, error) {
	r, err := newRoot(root, opts)
	if err != nil {
		return nil, err
	}
	desc := fmt.Sprintf("Read a text file in the working directory. Returns its lines, each prefixed "+
		"with its line number and a tab, and at most %d bytes per call: for a longer file, "+
		"read on with offset (the first line to read, from 1) and limit (the number of lines).", r.opts.MaxFileBytes)
	return classify(tool.KindRead)(tool.New("read_file", desc, r.readFile))
}

func (r *fsRoot) readFile(ctx context.Context, in readFileArgs) (string, error) {
	if in.Offset < 0 || in.Limit < 0 {
		return "", errors.New("offset and limit must not be negative")
	}
	offset := max(in.Offset, 1)
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
	if fi.IsDir() {
		return "", fmt.Errorf("%q is a directory; use list_dir to see what it holds", display(p))
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%q is not a regular file", display(p))
	}
	f, err := root.Open(p)
	if err != nil {
		return "", pathError(p, err)
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 64<<10)
	if bin, err := sniff(br); err != nil {
		return "", pathError(p, err)
	} else if bin {
		return "", fmt.Errorf("%w: %q has %d bytes of non-text content", ErrBinary, display(p), fi.Size())
	}

	var buf []byte
	lineNo := 0
	for lineNo < offset-1 {
		if lineNo%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return "", err
			}
		}
		if _, _, err = readLine(br, buf, 0); err == io.EOF {
			if lineNo == 0 {
				return "", fmt.Errorf("offset %d is past the end of %q, which is empty", offset, display(p))
			}
			return "", fmt.Errorf("offset %d is past the end of %q, which has %d lines", offset, display(p), lineNo)
		} else if err != nil {
			return "", pathError(p, err)
		}
		lineNo++
	}

	var out strings.Builder
	budget, count := r.opts.MaxFileBytes, 0
	for {
		if in.Limit > 0 && count == in.Limit {
			if _, err := br.Peek(1); err == nil {
				fmt.Fprintf(&out, "[the file goes on: read on with offset=%d]\n", lineNo+1)
			}
			break
		}
		if count%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return "", err
			}
		}
		var line []byte
		line, _, err = readLine(br, buf, budget+1)
		buf = line
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", pathError(p, err)
		}
		if len(line) > budget {
			if count == 0 {
				fmt.Fprintf(&out, "%6d\t%s\n", lineNo+1, line[:budget])
				fmt.Fprintf(&out, "[line %d is longer than the limit of %d bytes and was cut; read on with offset=%d]\n",
					lineNo+1, r.opts.MaxFileBytes, lineNo+2)
			} else {
				fmt.Fprintf(&out, "[stopped at the limit of %d bytes: read on with offset=%d]\n", r.opts.MaxFileBytes, lineNo+1)
			}
			break
		}
		lineNo++
		count++
		budget = max(budget-len(line)-1, 0)
		fmt.Fprintf(&out, "%6d\t%s\n", lineNo, line)
	}
	if out.Len() == 0 && offset > 1 {
		return "", fmt.Errorf("offset %d is past the end of %q, which has %d lines", offset, display(p), lineNo)
	}
	if out.Len() == 0 {
		return fmt.Sprintf("(%q is empty)", display(p)), nil
	}
	return out.String(), nil
}
