package builtin_test

import (
	"context"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/calf-go/calf/tool"
	"github.com/calf-go/calf/tool/builtin"
)

// TestNamesAreTheToolsNames makes every built-in tool and compares their
// names with Names, so that the list cannot drift from the constructors.
func TestNamesAreTheToolsNames(t *testing.T) {
	root := t.TempDir()
	var made []tool.Tool
	ro, err := builtin.ReadOnly(root)
	if err != nil {
		t.Fatal(err)
	}
	made = append(made, ro...)
	ed, err := builtin.Edit(root)
	if err != nil {
		t.Fatal(err)
	}
	made = append(made, ed...)
	b, err := builtin.Bash(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	made = append(made, b)
	f, err := builtin.WebFetch(nil)
	if err != nil {
		t.Fatal(err)
	}
	made = append(made, f)
	s, err := builtin.WebSearch(builtin.SearchFunc(func(context.Context, string, int) ([]builtin.SearchResult, error) { return nil, nil }), nil)
	if err != nil {
		t.Fatal(err)
	}
	made = append(made, s)
	var got []string
	for _, t := range made {
		got = append(got, t.Definition().Name)
	}
	slices.Sort(got)
	if diff := cmp.Diff(builtin.Names(), got); diff != "" {
		t.Errorf("Names() differs from the tools' names (-Names +tools):\n%s", diff)
	}
	builtin.Names()[0] = "changed"
	if builtin.Names()[0] != "bash" {
		t.Error("Names returns the package's own slice")
	}
}
