package builtin

import (
	"errors"
	"fmt"
	"path"
	"strings"
)

// pattern is a glob over slash-separated paths. Each segment is matched
// with path.Match ('*', '?', '[...]'), and a "**" segment matches any
// number of segments, none included. A pattern without a slash matches the
// last segment of a path, at any depth, and one that ends with a slash
// matches only directories, as in .gitignore files.
type pattern struct {
	segs     []string
	baseOnly bool
	dirOnly  bool
}

func parsePattern(p string) (*pattern, error) {
	if p == "" {
		return nil, errors.New("empty pattern")
	}
	if strings.HasPrefix(p, "/") {
		return nil, fmt.Errorf("pattern %q must be relative", p)
	}
	var segs []string
	for _, s := range strings.Split(strings.TrimSuffix(p, "/"), "/") {
		switch s {
		case "", ".":
			continue
		case "..":
			return nil, fmt.Errorf("%w: pattern %q", ErrOutsideRoot, p)
		case "**":
			if len(segs) > 0 && segs[len(segs)-1] == "**" {
				continue
			}
		default:
			if _, err := path.Match(s, ""); err != nil {
				return nil, fmt.Errorf("pattern %q: %w", p, err)
			}
		}
		segs = append(segs, s)
	}
	if len(segs) == 0 {
		return nil, fmt.Errorf("pattern %q matches nothing", p)
	}
	return &pattern{
		segs:     segs,
		baseOnly: !strings.Contains(strings.TrimSuffix(p, "/"), "/"),
		dirOnly:  strings.HasSuffix(p, "/"),
	}, nil
}

// literalPrefix returns the leading segments that have no wildcard: the
// directory a walk can start from.
func (p *pattern) literalPrefix() string {
	if p.baseOnly {
		return ""
	}
	var lit []string
	for _, s := range p.segs[:len(p.segs)-1] {
		if s == "**" || strings.ContainsAny(s, `*?[\`) {
			break
		}
		lit = append(lit, s)
	}
	return strings.Join(lit, "/")
}

// maxDepth returns the most segments a matching path can have, or -1 for
// no bound.
func (p *pattern) maxDepth() int {
	if p.baseOnly {
		return -1
	}
	for _, s := range p.segs {
		if s == "**" {
			return -1
		}
	}
	return len(p.segs)
}

// match reports whether the slash-separated path name, of a directory when
// dir is true, matches.
func (p *pattern) match(name string, dir bool) bool {
	if p.dirOnly && !dir {
		return false
	}
	if p.baseOnly {
		ok, _ := path.Match(p.segs[0], path.Base(name))
		return ok
	}
	return matchSegs(p.segs, strings.Split(name, "/"))
}

// matchSegs matches name against the segments of a pattern by dynamic
// programming, in time proportional to len(pat)*len(name).
func matchSegs(pat, name []string) bool {
	// next[j] reports whether pat[i+1:] matches name[j:]; cur is for pat[i:].
	next := make([]bool, len(name)+1)
	cur := make([]bool, len(name)+1)
	next[len(name)] = true
	for i := len(pat) - 1; i >= 0; i-- {
		for j := len(name); j >= 0; j-- {
			switch {
			case pat[i] == "**":
				cur[j] = next[j] || (j < len(name) && cur[j+1])
			case j == len(name):
				cur[j] = false
			default:
				ok, _ := path.Match(pat[i], name[j])
				cur[j] = ok && next[j+1]
			}
		}
		next, cur = cur, next
	}
	return next[0]
}
