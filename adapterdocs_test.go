package calf_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The documentation of each role package (broker, store) lists every
// adapter: each subpackage but the internal ones and the conformance
// suite.
func TestDocListsEveryAdapter(t *testing.T) {
	for role, suite := range map[string]string{"broker": "brokertest", "store": "storetest"} {
		doc, err := os.ReadFile(filepath.Join(role, "doc.go"))
		if err != nil {
			t.Fatal(err)
		}
		var dirs []string
		err = filepath.WalkDir(role, func(p string, d os.DirEntry, err error) error {
			if err != nil || !d.IsDir() || p == role {
				return err
			}
			switch d.Name() {
			case "internal", suite, "testdata":
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
			t.Fatalf("no adapters found under %s", role)
		}
		for _, d := range dirs {
			if !strings.Contains(string(doc), "github.com/calf-go/calf/"+d+"]") {
				t.Errorf("%s/doc.go does not list the adapter %s", role, d)
			}
		}
	}
}
