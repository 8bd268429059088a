package store_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The package documentation lists every adapter: each subpackage but the
// internal ones and the conformance suite.
func TestDocListsEveryAdapter(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	err = filepath.WalkDir(".", func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() || p == "." {
			return err
		}
		switch d.Name() {
		case "internal", "storetest", "testdata":
			return filepath.SkipDir
		}
		if files, _ := filepath.Glob(filepath.Join(p, "*.go")); len(files) > 0 {
			dirs = append(dirs, filepath.ToSlash(p))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) == 0 {
		t.Fatal("no adapters found")
	}
	for _, d := range dirs {
		if !strings.Contains(string(doc), "github.com/calf-go/calf/store/"+d+"]") {
			t.Errorf("doc.go does not list the adapter store/%s", d)
		}
	}
}
