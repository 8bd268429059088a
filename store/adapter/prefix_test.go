package adapter

import (
	"strings"
	"testing"
)

func FuzzPrefixEnd(f *testing.F) {
	for _, seed := range [][2]string{
		{"", "a"}, {"a", "a"}, {"a", "b"}, {"a\xff", "a\xff\x00"}, {"a\xff", "b"},
		{"\xff\xff", "\xff\xff\xff"}, {"é", "ê"}, {"x/", "x0"}, {"x%", "x%%"}, {"x_", "xa"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, prefix, s string) {
		end, bounded := PrefixEnd(prefix)
		inRange := s >= prefix && (!bounded || s < end)
		if inRange != strings.HasPrefix(s, prefix) {
			t.Errorf("prefix %q, end %q (bounded %v): %q in range = %v, has prefix = %v",
				prefix, end, bounded, s, inRange, !inRange)
		}
		if bounded && strings.HasPrefix(end, prefix) {
			t.Errorf("prefix %q: end %q itself has the prefix", prefix, end)
		}
	})
}
