package modeltest

import (
	"unicode"
	"unicode/utf8"
)

// splitWords cuts s into pieces that each end with a word and start with
// the white space before it, so that the pieces concatenate to s:
// "Hello big world" becomes "Hello", " big", " world".
func splitWords(s string) []string {
	var pieces []string
	start := 0
	inWord := false
	for i, r := range s {
		space := unicode.IsSpace(r)
		if space && inWord && i > start {
			pieces = append(pieces, s[start:i])
			start = i
		}
		inWord = !space
	}
	if start < len(s) {
		pieces = append(pieces, s[start:])
	}
	return pieces
}

// splitHalves cuts s in two at a rune boundary near its middle. It returns
// one piece for a string of at most one rune and none for an empty one.
func splitHalves(s string) []string {
	if s == "" {
		return nil
	}
	mid := len(s) / 2
	for mid > 0 && !utf8.RuneStart(s[mid]) {
		mid--
	}
	if mid == 0 {
		return []string{s}
	}
	return []string{s[:mid], s[mid:]}
}
