package engine

import (
	"encoding/json"
	"strings"
)

// CompleteJSON makes the longest usable prefix of a JSON object or array
// that is being streamed (after white space and a Markdown code fence)
// into valid JSON: it closes the string being written, if it is a value,
// and the open arrays and objects, and leaves out what cannot be
// completed without guessing (a key without its value, a number or a
// literal not yet ended, an escape sequence cut short). It reports false
// when s does not start an object or an array, or is not valid JSON as far
// as it goes.
func CompleteJSON(s string) (json.RawMessage, bool) {
	s = strings.TrimLeft(s, " \t\r\n")
	if rest, ok := strings.CutPrefix(s, "```"); ok {
		i := strings.IndexByte(rest, '\n')
		if i < 0 {
			return nil, false
		}
		s = strings.TrimLeft(rest[i+1:], " \t\r\n")
	}
	if s == "" || (s[0] != '{' && s[0] != '[') {
		return nil, false
	}
	const (
		needValue = iota // a value must come
		needKey          // a key (or, after '{', the end) must come
		needColon
		afterValue // ',' or the end of the container must come
	)
	var (
		stack    []byte // the open containers' closers
		state    = needValue
		cut      = -1    // s[:cut] ends at a point that can be completed
		cutStack []byte  // the closers to add at cut
		cutQuote bool    // cut is inside a value string
		empty    = false // the container just opened has no member yet
	)
	mark := func(i int, quote bool) {
		cut, cutQuote = i, quote
		cutStack = append(cutStack[:0], stack...)
	}
	endValue := func(i int) {
		state = afterValue
		mark(i, false)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		}
		switch state {
		case needValue, needKey:
			if state == needKey && c != '"' && !(c == '}' && empty) {
				return nil, false
			}
			switch {
			case c == '{' || c == '[':
				if c == '{' {
					stack, state = append(stack, '}'), needKey
				} else {
					stack, state = append(stack, ']'), needValue
				}
				empty = true
				mark(i+1, false)
				continue
			case (c == '}' || c == ']') && empty && len(stack) > 0 && stack[len(stack)-1] == c:
				stack = stack[:len(stack)-1]
				endValue(i + 1)
			case c == '"':
				key := state == needKey
				j, end := scanString(s, i+1)
				if end == scanBad {
					return nil, false
				}
				if end == scanMore {
					if !key {
						mark(j, true) // the value string so far
					}
					return finish(s, cut, cutQuote, cutStack)
				}
				i = j // the closing quote
				if key {
					state = needColon
				} else {
					endValue(i + 1)
				}
			case c == '-' || (c >= '0' && c <= '9'):
				j := i
				for j < len(s) && strings.IndexByte("+-.eE0123456789", s[j]) >= 0 {
					j++
				}
				if j == len(s) {
					return finish(s, cut, cutQuote, cutStack) // the number may go on
				}
				if !json.Valid([]byte(s[i:j])) {
					return nil, false
				}
				i = j - 1
				endValue(j)
			case c == 't' || c == 'f' || c == 'n':
				lit := map[byte]string{'t': "true", 'f': "false", 'n': "null"}[c]
				rest := s[i:]
				if len(rest) < len(lit) {
					if !strings.HasPrefix(lit, rest) {
						return nil, false
					}
					return finish(s, cut, cutQuote, cutStack)
				}
				if !strings.HasPrefix(rest, lit) {
					return nil, false
				}
				i += len(lit) - 1
				endValue(i + 1)
			default:
				return nil, false
			}
		case needColon:
			if c != ':' {
				return nil, false
			}
			state = needValue
		case afterValue:
			if len(stack) == 0 {
				return finish(s, cut, cutQuote, cutStack) // the value is whole: what follows is not ours
			}
			switch {
			case c == ',':
				if stack[len(stack)-1] == '}' {
					state = needKey
				} else {
					state = needValue
				}
			case c == stack[len(stack)-1]:
				stack = stack[:len(stack)-1]
				endValue(i + 1)
			default:
				return nil, false
			}
		}
		empty = false
	}
	return finish(s, cut, cutQuote, cutStack)
}

// scanString scans the string whose content starts at s[i]. It returns
// the index of its closing quote and ok, or, when s ends first, the index
// up to which its content is whole (before an escape cut short) and more;
// or bad, at a control character or an unknown escape.
func scanString(s string, i int) (int, scan) {
	for i < len(s) {
		switch c := s[i]; {
		case c == '"':
			return i, scanOK
		case c < 0x20:
			return i, scanBad
		case c == '\\':
			if i+1 == len(s) {
				return i, scanMore
			}
			switch s[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				for j := i + 2; j < i+6; j++ {
					if j == len(s) {
						return i, scanMore
					}
					if !strings.ContainsRune("0123456789abcdefABCDEF", rune(s[j])) {
						return i, scanBad
					}
				}
				i += 6
			default:
				return i, scanBad
			}
		default:
			i++
		}
	}
	return i, scanMore
}

// scan is how a scan of a string ended.
type scan int

// finish completes s[:cut] with a closing quote and the closers.
func finish(s string, cut int, quote bool, closers []byte) (json.RawMessage, bool) {
	if cut < 0 {
		return nil, false
	}
	var b strings.Builder
	b.Grow(cut + 1 + len(closers))
	b.WriteString(s[:cut])
	if quote {
		b.WriteByte('"')
	}
	for i := len(closers) - 1; i >= 0; i-- {
		b.WriteByte(closers[i])
	}
	return json.RawMessage(b.String()), true
}

const (
	scanOK   scan = iota // the string is whole
	scanMore             // the text ends inside the string
	scanBad              // the string is not valid JSON
)
