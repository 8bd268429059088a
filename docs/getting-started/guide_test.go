// Package guide_test keeps docs/getting-started.md in step with the
// programs it quotes, which the tests of step1 to step7 compile and run
// with scripted models, and the indexes of docs/ and examples/ complete.
package guide_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// marker is the HTML comment on the line before each Go block of the
// guide: "file: PATH" for a block that is the whole file, "from: PATH" for
// one that is a run of whole lines of it. PATH is relative to this
// directory.
var marker = regexp.MustCompile(`^<!-- (file|from): (\S+) -->$`)

// TestGuideQuotesTheCompiledPrograms checks every Go block of the guide
// against the file its marker names, and that every step's program is
// quoted.
func TestGuideQuotesTheCompiledPrograms(t *testing.T) {
	guide, err := os.ReadFile("../getting-started.md")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(guide), "\n")
	quoted := map[string]bool{}
	blocks := 0
	for i := 0; i < len(lines); i++ {
		if !strings.HasPrefix(lines[i], "```go") {
			continue
		}
		blocks++
		start := i + 1
		end := start
		for end < len(lines) && lines[end] != "```" {
			end++
		}
		if end == len(lines) {
			t.Fatalf("line %d: a Go block that does not end", i+1)
		}
		block := strings.Join(lines[start:end], "\n") + "\n"
		i = end
		var m []string
		if start >= 2 {
			m = marker.FindStringSubmatch(lines[start-2])
		}
		if m == nil {
			t.Errorf("line %d: a Go block without a <!-- file: PATH --> or <!-- from: PATH --> line before it", start-1)
			continue
		}
		src, err := os.ReadFile(filepath.FromSlash(m[2]))
		if err != nil {
			t.Errorf("line %d: %v", start-1, err)
			continue
		}
		quoted[m[2]] = true
		switch m[1] {
		case "file":
			if block != string(src) {
				t.Errorf("line %d: the block differs from %s; copy the file into the guide", start-1, m[2])
			}
		case "from":
			if !strings.HasPrefix(string(src), block) && !strings.Contains(string(src), "\n"+block) {
				t.Errorf("line %d: the block is not a run of whole lines of %s", start-1, m[2])
			}
		}
	}
	if blocks == 0 {
		t.Fatal("the guide has no Go block")
	}
	steps, err := filepath.Glob("step*/main.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range steps {
		if !quoted[filepath.ToSlash(s)] {
			t.Errorf("the guide does not quote %s", s)
		}
	}
}

// TestIndexes checks that docs/README.md links every page of docs/,
// examples/README.md every example, and docs/benchmarks.md every study of
// docs/benchmarks/.
func TestIndexes(t *testing.T) {
	for _, tc := range []struct {
		index, glob, prefix string
	}{
		{"../README.md", "../*.md", ""},
		{"../../examples/README.md", "../../examples/*/main.go", ""},
		{"../benchmarks.md", "../benchmarks/*.md", "benchmarks/"},
	} {
		index, err := os.ReadFile(tc.index)
		if err != nil {
			t.Fatal(err)
		}
		found, err := filepath.Glob(tc.glob)
		if err != nil || len(found) == 0 {
			t.Fatalf("%s: %v, %d files", tc.glob, err, len(found))
		}
		for _, f := range found {
			name := filepath.Base(f)
			if name == "main.go" {
				name = filepath.Base(filepath.Dir(f))
			}
			if name == "README.md" {
				continue
			}
			if !strings.Contains(string(index), "]("+tc.prefix+name+")") {
				t.Errorf("%s does not link %s", tc.index, name)
			}
		}
	}
}
