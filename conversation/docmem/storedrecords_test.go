package docmem_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/calf-go/calf/conversation/docmem"
	"github.com/calf-go/calf/store"
	storemem "github.com/calf-go/calf/store/memory"
)

// storedRecord is a record of testdata/records: kind, id and data as an
// earlier version wrote them; see testdata/records/README.md.
type storedRecord struct {
	Kind string          `json:"kind"`
	ID   string          `json:"id"`
	Data json.RawMessage `json:"data"`
}

// storedStore is a memory store holding the records of the fixture name.
func storedStore(t *testing.T, name string) store.Store {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "records", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var recs []storedRecord
	if err := json.Unmarshal(data, &recs); err != nil {
		t.Fatal(err)
	}
	s := storemem.New()
	for _, r := range recs {
		if _, err := s.Put(t.Context(), r.Kind, r.ID, r.Data, 0); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// Documents stored by an earlier version are read by this one (listed,
// read as Markdown, outlined, searched), remember the commands applied to
// them (one applied again is a duplicate, an id reused for another command
// is refused), and take new commands, numbering new nodes after theirs.
func TestStoredRecords(t *testing.T) {
	ctx := t.Context()
	m := docmem.New(storedStore(t, "documents"), nil)
	const conv = "0b6f0000-0000-4000-8000-000000000001"
	apply := func(conv string, c docmem.Command) docmem.Result {
		t.Helper()
		res, err := m.Apply(ctx, conv, c)
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		return res
	}

	if res := apply(conv, docmem.Command{Command: docmem.CmdList}); !res.OK || strings.Join(res.Docs, ",") != "empty,project-notes" {
		t.Errorf("list: %+v", res)
	}
	if res := apply("0b6f0000-0000-4000-8000-000000000002", docmem.Command{Command: docmem.CmdList}); !res.OK || strings.Join(res.Docs, ",") != "other" {
		t.Errorf("list of the other conversation: %+v", res)
	}
	read := apply(conv, docmem.Command{Command: docmem.CmdRead, Doc: "project-notes"})
	if !read.OK {
		t.Fatalf("read: %+v", read)
	}
	// The nodes in document order: the stored moves and inserts kept.
	at := -1
	for _, s := range []string{"Project notes", "Decisions", "Use Go 1.26 and iter.Seq2", "Ship v1", "To do", "Write the README"} {
		i := strings.Index(read.Text, s)
		if i <= at {
			t.Errorf("read: %q missing or out of order in\n%s", s, read.Text)
		}
		at = i
	}
	if strings.Contains(read.Text, "Scratch") {
		t.Errorf("read: the deleted node is there:\n%s", read.Text)
	}
	outline := apply(conv, docmem.Command{Command: docmem.CmdOutline, Doc: "project-notes"})
	for _, id := range []string{"n1", "n2", "n3", "n4", "todo"} {
		if !outline.OK || !strings.Contains(outline.Text, id) {
			t.Errorf("outline lacks %s: %+v", id, outline)
		}
	}
	if sub := apply(conv, docmem.Command{Command: docmem.CmdRead, Doc: "project-notes", Node: "todo"}); !sub.OK ||
		!strings.Contains(sub.Text, "Write the README") || strings.Contains(sub.Text, "Decisions") {
		t.Errorf("read of todo: %+v", sub)
	}
	if found := apply(conv, docmem.Command{Command: docmem.CmdFind, Doc: "project-notes", Text: "go 1.26"}); !found.OK ||
		len(found.Matches) != 1 || found.Matches[0].Node != "n2" || found.Matches[0].Text != "Use Go 1.26 and iter.Seq2" {
		t.Errorf("find: %+v", found)
	}

	// The stored commands are remembered.
	if dup := apply(conv, docmem.Command{Command: docmem.CmdAppend, ID: "c3", Doc: "project-notes", Parent: "n1", Text: "Use Go 1.26"}); !dup.OK || !dup.Duplicate || dup.Node != "n2" {
		t.Errorf("a stored command applied again: %+v", dup)
	}
	if reused := apply(conv, docmem.Command{Command: docmem.CmdAppend, ID: "c3", Doc: "project-notes", Parent: "root", Text: "Other"}); reused.OK {
		t.Errorf("a stored command's id reused for another command: %+v", reused)
	}

	// New commands go on from the stored document.
	if res := apply(conv, docmem.Command{Command: docmem.CmdAppend, ID: "c12", Doc: "project-notes", Parent: "todo", Text: "Tag the release"}); !res.OK || res.Node != "n6" {
		t.Errorf("append: %+v; want node n6, after the stored ones", res)
	}
	if res := apply(conv, docmem.Command{Command: docmem.CmdAppend, ID: "c13", Doc: "empty", Parent: "root", Text: "First"}); !res.OK || res.Node != "n1" {
		t.Errorf("append to the empty document: %+v", res)
	}
	if res := apply(conv, docmem.Command{Command: docmem.CmdDelete, ID: "c14", Doc: "project-notes", Node: "n1"}); !res.OK {
		t.Errorf("delete: %+v", res)
	}
	if res := apply(conv, docmem.Command{Command: docmem.CmdRead, Doc: "project-notes"}); !res.OK || strings.Contains(res.Text, "Decisions") ||
		strings.Contains(res.Text, "Ship v1") || !strings.Contains(res.Text, "Tag the release") {
		t.Errorf("read after the changes: %+v", res)
	}
	if res := apply(conv, docmem.Command{Command: docmem.CmdCreate, ID: "c15", Doc: "project-notes", Text: "Again"}); res.OK {
		t.Errorf("create over a stored document: %+v", res)
	}
}
