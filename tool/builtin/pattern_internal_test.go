package builtin

import (
	"strings"
	"testing"
)

func TestPattern(t *testing.T) {
	tests := []struct {
		pattern string
		name    string
		dir     bool
		want    bool
	}{
		{"*.go", "main.go", false, true},
		{"*.go", "a/b/c/main.go", false, true},
		{"*.go", "a/main.go/x", false, false},
		{"a/*.go", "a/main.go", false, true},
		{"a/*.go", "a/b/main.go", false, false},
		{"a/*.go", "b/a/main.go", false, false},
		{"a/**/*.go", "a/main.go", false, true},
		{"a/**/*.go", "a/b/c/main.go", false, true},
		{"a/**/*.go", "b/main.go", false, false},
		{"**/b/**", "x/b/y/z", false, true},
		{"**/b/**", "x/c/y/z", false, false},
		{"**", "any/thing", false, true},
		{"a/**/**/b", "a/b", false, true},
		{"./a/*", "a/x", false, true},
		{"sub/", "x/sub", true, true},
		{"sub/", "x/sub", false, false},
		{"a/?", "a/bc", false, false},
		{"a/[bc]", "a/c", false, true},
	}
	for _, tt := range tests {
		p, err := parsePattern(tt.pattern)
		if err != nil {
			t.Fatalf("parsePattern(%q): %v", tt.pattern, err)
		}
		if got := p.match(tt.name, tt.dir); got != tt.want {
			t.Errorf("%q matches %q (dir %v) = %v, want %v", tt.pattern, tt.name, tt.dir, got, tt.want)
		}
	}
}

func TestPatternPruning(t *testing.T) {
	tests := []struct {
		pattern string
		prefix  string
		depth   int
	}{
		{"*.go", "", -1},
		{"src/cmd/*.go", "src/cmd", 3},
		{"src/*/x.go", "src", 3},
		{"src/**/x.go", "src", -1},
		{"[s]rc/x.go", "", 2},
	}
	for _, tt := range tests {
		p, err := parsePattern(tt.pattern)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.literalPrefix(); got != tt.prefix {
			t.Errorf("literalPrefix(%q) = %q, want %q", tt.pattern, got, tt.prefix)
		}
		if got := p.maxDepth(); got != tt.depth {
			t.Errorf("maxDepth(%q) = %d, want %d", tt.pattern, got, tt.depth)
		}
	}
}

func TestPatternErrors(t *testing.T) {
	for _, bad := range []string{"", "/abs", "a/../b", "[", ".", "./"} {
		if _, err := parsePattern(bad); err == nil {
			t.Errorf("parsePattern(%q) gave no error", bad)
		}
	}
}

// BenchmarkMatchDoubleStar checks that many "**" segments against a deep
// path stay cheap.
func BenchmarkMatchDoubleStar(b *testing.B) {
	p, err := parsePattern(strings.Repeat("**/a/", 10) + "z")
	if err != nil {
		b.Fatal(err)
	}
	name := strings.Repeat("a/", 60) + "y"
	b.ReportAllocs()
	for b.Loop() {
		if p.match(name, false) {
			b.Fatal("matched")
		}
	}
}
