package calf

import (
	"fmt"
	"strings"
)

// ValidateChannel reports whether name is a valid channel to publish on:
// non-empty dot-separated tokens without wildcards or white space.
func ValidateChannel(name string) error {
	if name == "" {
		return fmt.Errorf("%w: empty channel", ErrInvalidChannel)
	}
	// One pass over the bytes: every publish checks its channel.
	prev := byte('.')
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c == '*' || c == '>' || c <= ' ' || c == 0x7f || (c == '.' && prev == '.') {
			return fmt.Errorf("%w: %q", ErrInvalidChannel, name)
		}
		prev = c
	}
	if prev == '.' {
		return fmt.Errorf("%w: %q", ErrInvalidChannel, name)
	}
	return nil
}

// hasSpaceOrControl reports whether s holds white space or a control
// character, which no broker accepts in a subject or topic name.
func hasSpaceOrControl(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c == 0x7f {
			return true
		}
	}
	return false
}

// ValidatePattern reports whether p is a valid subscription pattern: a
// channel whose tokens may be "*" (one token) and whose last token may be ">"
// (one or more tokens).
func ValidatePattern(p string) error {
	if p == "" {
		return fmt.Errorf("%w: empty pattern", ErrInvalidChannel)
	}
	toks := strings.Split(p, ".")
	for i, tok := range toks {
		switch {
		case tok == "*":
		case tok == ">":
			if i != len(toks)-1 {
				return fmt.Errorf("%w: %q: '>' must be the last token", ErrInvalidChannel, p)
			}
		case tok == "" || strings.ContainsAny(tok, "*>") || hasSpaceOrControl(tok):
			return fmt.Errorf("%w: %q", ErrInvalidChannel, p)
		}
	}
	return nil
}

// MatchChannel reports whether channel matches pattern.
func MatchChannel(pattern, channel string) bool {
	for {
		pi := strings.IndexByte(pattern, '.')
		ci := strings.IndexByte(channel, '.')
		var pt, ct string
		if pi < 0 {
			pt = pattern
		} else {
			pt = pattern[:pi]
		}
		if ci < 0 {
			ct = channel
		} else {
			ct = channel[:ci]
		}
		if pt == ">" {
			return ct != ""
		}
		if pt != "*" && pt != ct {
			return false
		}
		if pi < 0 || ci < 0 {
			return pi < 0 && ci < 0
		}
		pattern, channel = pattern[pi+1:], channel[ci+1:]
	}
}
