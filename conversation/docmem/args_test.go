package docmem_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/calf-go/calf/conversation/docmem"
)

func TestCommandFromArgs(t *testing.T) {
	zero, two := 0, 2
	good := []struct {
		args []string
		want docmem.Command
	}{
		{[]string{"docmem-create", "project-notes"}, docmem.Command{Command: "create", ID: "c1", Doc: "project-notes"}},
		{[]string{"create", "notes", "Notes"}, docmem.Command{Command: "create", ID: "c1", Doc: "notes", Text: "Notes"}},
		{[]string{"docmem-append", "notes", "root", "Decisions"}, docmem.Command{Command: "append", ID: "c1", Doc: "notes", Parent: "root", Text: "Decisions"}},
		{[]string{"append", "notes", "root", "Decisions", "dec"}, docmem.Command{Command: "append", ID: "c1", Doc: "notes", Parent: "root", Text: "Decisions", Node: "dec"}},
		{[]string{"insert", "notes", "root", "0", "Goals"}, docmem.Command{Command: "insert", ID: "c1", Doc: "notes", Parent: "root", Index: &zero, Text: "Goals"}},
		{[]string{"update", "notes", "n1", "New"}, docmem.Command{Command: "update", ID: "c1", Doc: "notes", Node: "n1", Text: "New"}},
		{[]string{"delete", "notes", "n1"}, docmem.Command{Command: "delete", ID: "c1", Doc: "notes", Node: "n1"}},
		{[]string{"move", "notes", "n1", "n2", "2"}, docmem.Command{Command: "move", ID: "c1", Doc: "notes", Node: "n1", Parent: "n2", Index: &two}},
		{[]string{"read", "notes"}, docmem.Command{Command: "read", ID: "c1", Doc: "notes"}},
		{[]string{"docmem-find", "notes", "db"}, docmem.Command{Command: "find", ID: "c1", Doc: "notes", Text: "db"}},
		{[]string{"list"}, docmem.Command{Command: "list", ID: "c1"}},
	}
	for _, g := range good {
		got, err := docmem.CommandFromArgs(g.args, "c1")
		if err != nil {
			t.Errorf("%q: %v", g.args, err)
			continue
		}
		if diff := cmp.Diff(g.want, got); diff != "" {
			t.Errorf("%q (-want +got):\n%s", g.args, diff)
		}
	}
	bad := []struct {
		args []string
		id   string
		err  error
	}{
		{nil, "c1", docmem.ErrUnknownCommand},
		{[]string{"docmem-explode"}, "c1", docmem.ErrUnknownCommand},
		{[]string{"append", "notes", "root"}, "c1", docmem.ErrMissingArgument},
		{[]string{"create", "notes"}, "", docmem.ErrMissingArgument},
		{[]string{"delete", "notes", "n1", "extra"}, "c1", docmem.ErrInvalidArgument},
		{[]string{"insert", "notes", "root", "first", "Goals"}, "c1", docmem.ErrInvalidArgument},
		{[]string{"read", "notes\x00"}, "c1", docmem.ErrInvalidArgument},
	}
	for _, b := range bad {
		if _, err := docmem.CommandFromArgs(b.args, b.id); !errors.Is(err, b.err) {
			t.Errorf("%q: %v, want %v", b.args, err, b.err)
		}
	}
}
