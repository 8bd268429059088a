package docmem_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/conversation/docmem"
	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/store/storetest"
)

// run handles a JSON command and fails the test on a store error.
// newConversationID returns a conversation id of the test's own: a new
// calf.NewID in the UUID format of conversation ids.
func newConversationID() string {
	h := calf.NewID()
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

func run(t *testing.T, m *docmem.Memory, conv, cmd string) docmem.Result {
	t.Helper()
	res, err := m.Handle(t.Context(), conv, []byte(cmd))
	if err != nil {
		t.Fatalf("Handle(%s): %v", cmd, err)
	}
	return res
}

// ok runs cmd and fails the test unless it succeeded.
func ok(t *testing.T, m *docmem.Memory, conv, cmd string) docmem.Result {
	t.Helper()
	res := run(t, m, conv, cmd)
	if !res.OK {
		t.Fatalf("%s: %s: %s", cmd, res.Code, res.Error)
	}
	return res
}

func TestCommands(t *testing.T) {
	eachStore(t, func(t *testing.T, s store.Store) {
		m := docmem.New(s, nil)
		conv := newConversationID()
		if r := ok(t, m, conv, `{"command":"create","id":"c1","doc":"project-notes","text":"Project notes"}`); r.Node != docmem.Root {
			t.Errorf("create: %+v", r)
		}
		dec := ok(t, m, conv, `{"command":"append","id":"c2","doc":"project-notes","parent":"root","text":"Decisions\nWhat we settled."}`)
		goals := ok(t, m, conv, `{"command":"insert","id":"c3","doc":"project-notes","parent":"root","index":0,"text":"Goals"}`)
		if dec.Node != "n1" || goals.Node != "n2" {
			t.Errorf("new nodes %q and %q, want n1 and n2", dec.Node, goals.Node)
		}
		ok(t, m, conv, `{"command":"append","id":"c4","doc":"project-notes","parent":"n1","text":"Use PostgreSQL.","node":"db"}`)
		ok(t, m, conv, `{"command":"append","id":"c5","doc":"project-notes","parent":"n1","text":"Ship in May."}`)
		ok(t, m, conv, `{"command":"update","id":"c6","doc":"project-notes","node":"n3","text":"Ship in June."}`)
		read := ok(t, m, conv, `{"command":"read","doc":"project-notes"}`)
		want := "# Project notes\n\nGoals\n\n## Decisions\n\nWhat we settled.\n\nUse PostgreSQL.\n\nShip in June.\n"
		if diff := cmp.Diff(want, read.Text); diff != "" {
			t.Errorf("read (-want +got):\n%s", diff)
		}
		sub := ok(t, m, conv, `{"command":"read","doc":"project-notes","node":"n1"}`)
		if !strings.HasPrefix(sub.Text, "# Decisions\n") || strings.Contains(sub.Text, "Goals") {
			t.Errorf("read of a subtree: %q", sub.Text)
		}
		// Move the database decision under Goals, first.
		ok(t, m, conv, `{"command":"move","id":"c7","doc":"project-notes","node":"db","parent":"n2","index":0}`)
		outline := ok(t, m, conv, `{"command":"outline","doc":"project-notes"}`)
		wantOutline := "- [root] Project notes\n  - [n2] Goals\n    - [db] Use PostgreSQL.\n  - [n1] Decisions\n    - [n3] Ship in June.\n"
		if diff := cmp.Diff(wantOutline, outline.Text); diff != "" {
			t.Errorf("outline (-want +got):\n%s", diff)
		}
		found := ok(t, m, conv, `{"command":"find","doc":"project-notes","text":"SHIP"}`)
		if len(found.Matches) != 1 || found.Matches[0].Node != "n3" {
			t.Errorf("find: %+v", found.Matches)
		}
		ok(t, m, conv, `{"command":"delete","id":"c8","doc":"project-notes","node":"n2"}`)
		outline = ok(t, m, conv, `{"command":"outline","doc":"project-notes"}`)
		if strings.Contains(outline.Text, "db") || strings.Contains(outline.Text, "n2") {
			t.Errorf("the deleted subtree is still there:\n%s", outline.Text)
		}
		ok(t, m, conv, `{"command":"create","id":"c9","doc":"b-doc"}`)
		if r := ok(t, m, conv, `{"command":"list"}`); !slices(r.Docs, "b-doc", "project-notes") {
			t.Errorf("list: %q", r.Docs)
		}
		if r := ok(t, m, newConversationID(), `{"command":"list"}`); len(r.Docs) != 0 {
			t.Errorf("another conversation lists %q", r.Docs)
		}
	})
}

func slices(got []string, want ...string) bool { return cmp.Equal(got, want) }

func TestCommandErrors(t *testing.T) {
	m := docmem.New(stores()["memory"](t), nil)
	conv := newConversationID()
	ok(t, m, conv, `{"command":"create","id":"c1","doc":"d","text":"T"}`)
	ok(t, m, conv, `{"command":"append","id":"c2","doc":"d","parent":"root","text":"a"}`)
	ok(t, m, conv, `{"command":"append","id":"c3","doc":"d","parent":"n1","text":"b"}`)
	big := strings.Repeat("x", docmem.MaxTextBytes+1)
	cases := []struct {
		name, cmd string
		code      docmem.Code
	}{
		{"unknown command", `{"command":"explode","doc":"d"}`, docmem.CodeUnknownCommand},
		{"no command", `{"doc":"d"}`, docmem.CodeUnknownCommand},
		{"no id", `{"command":"append","doc":"d","parent":"root","text":"x"}`, docmem.CodeMissingArgument},
		{"no doc", `{"command":"read"}`, docmem.CodeMissingArgument},
		{"append without parent", `{"command":"append","id":"e","doc":"d","text":"x"}`, docmem.CodeMissingArgument},
		{"append without text", `{"command":"append","id":"e","doc":"d","parent":"root"}`, docmem.CodeMissingArgument},
		{"insert without index", `{"command":"insert","id":"e","doc":"d","parent":"root","text":"x"}`, docmem.CodeMissingArgument},
		{"update without node", `{"command":"update","id":"e","doc":"d","text":"x"}`, docmem.CodeMissingArgument},
		{"update without text", `{"command":"update","id":"e","doc":"d","node":"n1"}`, docmem.CodeMissingArgument},
		{"delete without node", `{"command":"delete","id":"e","doc":"d"}`, docmem.CodeMissingArgument},
		{"move without parent", `{"command":"move","id":"e","doc":"d","node":"n1"}`, docmem.CodeMissingArgument},
		{"find without text", `{"command":"find","doc":"d"}`, docmem.CodeMissingArgument},
		{"unknown document", `{"command":"append","id":"e","doc":"nope","parent":"root","text":"x"}`, docmem.CodeUnknownDocument},
		{"read unknown document", `{"command":"outline","doc":"nope"}`, docmem.CodeUnknownDocument},
		{"unknown parent", `{"command":"append","id":"e","doc":"d","parent":"n9","text":"x"}`, docmem.CodeUnknownNode},
		{"update unknown node", `{"command":"update","id":"e","doc":"d","node":"n9","text":"x"}`, docmem.CodeUnknownNode},
		{"read unknown node", `{"command":"read","doc":"d","node":"n9"}`, docmem.CodeUnknownNode},
		{"move under itself", `{"command":"move","id":"e","doc":"d","node":"n1","parent":"n1"}`, docmem.CodeMoveIntoItself},
		{"move under its child", `{"command":"move","id":"e","doc":"d","node":"n1","parent":"n2"}`, docmem.CodeMoveIntoItself},
		{"move the root", `{"command":"move","id":"e","doc":"d","node":"root","parent":"n1"}`, docmem.CodeMoveIntoItself},
		{"delete the root", `{"command":"delete","id":"e","doc":"d","node":"root"}`, docmem.CodeMoveIntoItself},
		{"index out of range", `{"command":"insert","id":"e","doc":"d","parent":"root","index":5,"text":"x"}`, docmem.CodeInvalidArgument},
		{"negative index", `{"command":"insert","id":"e","doc":"d","parent":"root","index":-1,"text":"x"}`, docmem.CodeInvalidArgument},
		{"node exists", `{"command":"append","id":"e","doc":"d","parent":"root","text":"x","node":"n1"}`, docmem.CodeNodeExists},
		{"document exists", `{"command":"create","id":"e","doc":"d"}`, docmem.CodeDocumentExists},
		{"huge text", `{"command":"append","id":"e","doc":"d","parent":"root","text":"` + big + `"}`, docmem.CodeTooLarge},
		{"huge command", `{"command":"append","id":"e","doc":"d","parent":"root","text":"` + strings.Repeat(`\u0041`, docmem.MaxCommandBytes/6+1) + `"}`, docmem.CodeTooLarge},
		{"huge query", `{"command":"find","doc":"d","text":"` + strings.Repeat("q", docmem.MaxQueryBytes+1) + `"}`, docmem.CodeTooLarge},
		{"control character in an id", `{"command":"append","id":"e\u0000","doc":"d","parent":"root","text":"x"}`, docmem.CodeInvalidArgument},
		{"control character in a doc", `{"command":"read","doc":"d\n"}`, docmem.CodeInvalidArgument},
		{"control character in a node", `{"command":"read","doc":"d","node":"n\u001b[31m"}`, docmem.CodeInvalidArgument},
		{"line separator in a node", `{"command":"read","doc":"d","node":"n\u2028"}`, docmem.CodeInvalidArgument},
		{"long id", `{"command":"read","doc":"` + strings.Repeat("d", docmem.MaxIDLen+1) + `"}`, docmem.CodeInvalidArgument},
		{"control character in text", `{"command":"append","id":"e","doc":"d","parent":"root","text":"a\u0007"}`, docmem.CodeInvalidArgument},
		{"id reused", `{"command":"append","id":"c2","doc":"d","parent":"root","text":"other"}`, docmem.CodeIDReused},
		{"not JSON", `{"command":`, docmem.CodeInvalidArgument},
		{"unknown field", `{"command":"read","doc":"d","path":"/etc"}`, docmem.CodeInvalidArgument},
		{"two objects", `{"command":"read","doc":"d"}{"command":"read","doc":"d"}`, docmem.CodeInvalidArgument},
		{"a list", `["read"]`, docmem.CodeInvalidArgument},
		{"wrong type", `{"command":"insert","id":"e","doc":"d","parent":"root","index":"0","text":"x"}`, docmem.CodeInvalidArgument},
	}
	before, err := m.Handle(t.Context(), conv, []byte(`{"command":"read","doc":"d"}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := run(t, m, conv, c.cmd)
			if res.OK || res.Code != c.code || res.Error == "" {
				t.Errorf("result %s %q, want code %s", res.Code, res.Error, c.code)
			}
			if err := res.Err(); !errors.Is(err, &docmem.Error{Code: c.code}) {
				t.Errorf("Err() = %v does not match its code", err)
			}
			b, _ := json.Marshal(res)
			if !strings.Contains(string(b), `"ok":false`) {
				t.Errorf("the JSON of an error result: %s", b)
			}
		})
	}
	after := ok(t, m, conv, `{"command":"read","doc":"d"}`)
	if after.Text != before.Text {
		t.Errorf("failed commands changed the document:\n%s\nthen\n%s", before.Text, after.Text)
	}
	if !errors.Is((&docmem.Result{Code: docmem.CodeUnknownNode}).Err(), docmem.ErrUnknownNode) {
		t.Error("an unknown_node result does not match ErrUnknownNode")
	}
	if _, err := m.Apply(t.Context(), "not-a-uuid", docmem.Command{Command: "list"}); err == nil {
		t.Error("a conversation that is no UUID was accepted")
	}
}

// TestDepthAndSizeBounds fills a document up to its bounds: the command
// past one is refused, and the document stays as it was.
func TestDepthAndSizeBounds(t *testing.T) {
	m := docmem.New(stores()["memory"](t), nil)
	conv := newConversationID()
	ok(t, m, conv, `{"command":"create","id":"c","doc":"deep"}`)
	parent := docmem.Root
	for i := range docmem.MaxDepth {
		parent = ok(t, m, conv, fmt.Sprintf(`{"command":"append","id":"d%d","doc":"deep","parent":%q,"text":"level %d"}`, i, parent, i+1)).Node
	}
	if r := run(t, m, conv, fmt.Sprintf(`{"command":"append","id":"over","doc":"deep","parent":%q,"text":"too deep"}`, parent)); r.Code != docmem.CodeTooDeep {
		t.Errorf("a node below the deepest level: %+v", r)
	}
	// A subtree of two levels moved under a node that leaves room for one.
	ok(t, m, conv, `{"command":"append","id":"s1","doc":"deep","parent":"root","text":"s","node":"s"}`)
	ok(t, m, conv, `{"command":"append","id":"s2","doc":"deep","parent":"s","text":"s child"}`)
	if r := run(t, m, conv, `{"command":"move","id":"m","doc":"deep","node":"s","parent":"n15"}`); r.Code != docmem.CodeTooDeep {
		t.Errorf("a move past the deepest level: %+v", r)
	}

	ok(t, m, conv, `{"command":"create","id":"c","doc":"big"}`)
	text := strings.Repeat("y", docmem.MaxTextBytes)
	var last docmem.Result
	n := 0
	for n = range 100 {
		last = run(t, m, conv, fmt.Sprintf(`{"command":"append","id":"b%d","doc":"big","parent":"root","text":%q}`, n, text))
		if !last.OK {
			break
		}
	}
	if last.Code != docmem.CodeTooLarge || n < docmem.MaxDocumentBytes/docmem.MaxTextBytes-2 {
		t.Errorf("after %d appends of %d bytes: %+v", n, docmem.MaxTextBytes, last.Code)
	}
	outline := ok(t, m, conv, `{"command":"outline","doc":"big"}`)
	if got := strings.Count(outline.Text, "\n"); got != n+1 {
		t.Errorf("the outline has %d lines after %d appends, want %d", got, n, n+1)
	}
}

func TestRedelivery(t *testing.T) {
	eachStore(t, func(t *testing.T, s store.Store) {
		m := docmem.New(s, nil)
		conv := newConversationID()
		create := `{"command":"create","id":"c1","doc":"d","text":"T"}`
		ok(t, m, conv, create)
		if r := ok(t, m, conv, create); !r.Duplicate {
			t.Errorf("create again: %+v", r)
		}
		appendCmd := `{"command":"append","id":"c2","doc":"d","parent":"root","text":"once"}`
		first := ok(t, m, conv, appendCmd)
		second := ok(t, m, conv, appendCmd)
		if first.Duplicate || !second.Duplicate || second.Node != first.Node {
			t.Errorf("append twice: %+v then %+v", first, second)
		}
		move := `{"command":"move","id":"c3","doc":"d","node":"n1","parent":"root","index":0}`
		ok(t, m, conv, move)
		del := `{"command":"delete","id":"c4","doc":"d","node":"n1"}`
		ok(t, m, conv, del)
		// The delete delivered again is no error about a missing node.
		if r := ok(t, m, conv, del); !r.Duplicate {
			t.Errorf("delete again: %+v", r)
		}
		rec, err := s.Get(t.Context(), docmem.KindDocument, conv+"/d")
		if err != nil {
			t.Fatal(err)
		}
		if rec.Version != 4 {
			t.Errorf("the record is at version %d after 4 changes and 3 duplicates", rec.Version)
		}
		// Ids are remembered up to MaxApplied commands back.
		for i := range docmem.MaxApplied {
			ok(t, m, conv, fmt.Sprintf(`{"command":"update","id":"u%d","doc":"d","node":"root","text":"T%d"}`, i, i))
		}
		if r := ok(t, m, conv, `{"command":"update","id":"u0","doc":"d","node":"root","text":"T0"}`); !r.Duplicate {
			t.Errorf("a command %d commands back was applied again", docmem.MaxApplied-1)
		}
		if r := ok(t, m, conv, appendCmd); r.Duplicate {
			t.Errorf("a command more than %d commands back is still remembered", docmem.MaxApplied)
		}
	})
}

// TestConcurrentWriters has writers append to one document at once: every
// append lands once, none is lost to a conflict.
func TestConcurrentWriters(t *testing.T) {
	eachStore(t, func(t *testing.T, s store.Store) {
		m := docmem.New(s, nil)
		conv := newConversationID()
		ok(t, m, conv, `{"command":"create","id":"c","doc":"d"}`)
		const writers, each = 4, 15
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				for i := range each {
					// Each command twice, as a redelivery would.
					for range 2 {
						res, err := m.Apply(t.Context(), conv, docmem.Command{Command: docmem.CmdAppend, ID: fmt.Sprintf("w%d-%d", w, i), Doc: "d", Parent: docmem.Root, Text: fmt.Sprintf("w%d-%d", w, i)})
						if err != nil || !res.OK {
							t.Errorf("append: %+v, %v", res, err)
						}
					}
				}
			})
		}
		wg.Wait()
		outline := ok(t, m, conv, `{"command":"outline","doc":"d"}`)
		for w := range writers {
			for i := range each {
				if n := strings.Count(outline.Text, fmt.Sprintf("] w%d-%d\n", w, i)); n != 1 {
					t.Errorf("w%d-%d appears %d times", w, i, n)
				}
			}
		}
	})
}

// TestFaultyStore applies commands through a store that fails writes and
// loses replies, each command retried until it succeeds: the document
// ends as a clean run leaves it.
func TestFaultyStore(t *testing.T) {
	for seed := range uint64(10) {
		base := stores()["memory"](t)
		fs := storetest.WithFaults(base, storetest.Faults{Seed: seed, WriteFailRate: 0.2, LostReplyRate: 0.3, ConcurrentWriteRate: 0.2, ReadFailRate: 0.1})
		m := docmem.New(fs, nil)
		conv := newConversationID()
		cmds := []docmem.Command{{Command: docmem.CmdCreate, ID: "c", Doc: "d", Text: "T"}}
		for i := range 10 {
			cmds = append(cmds, docmem.Command{Command: docmem.CmdAppend, ID: fmt.Sprint("a", i), Doc: "d", Parent: docmem.Root, Text: fmt.Sprint("item ", i)})
		}
		for _, c := range cmds {
			for attempt := 0; ; attempt++ {
				res, err := m.Apply(t.Context(), conv, c)
				if err == nil {
					if !res.OK {
						t.Fatalf("seed %d: %s %s: %s", seed, c.Command, c.ID, res.Error)
					}
					break
				}
				if !errors.Is(err, storetest.ErrInjected) || attempt > 50 {
					t.Fatalf("seed %d: %v", seed, err)
				}
			}
		}
		clean := docmem.New(base, nil)
		outline := ok(t, clean, conv, `{"command":"outline","doc":"d"}`)
		want := "- [root] T\n"
		for i := range 10 {
			want += fmt.Sprintf("  - [n%d] item %d\n", i+1, i)
		}
		if outline.Text != want {
			t.Errorf("seed %d: outline\n%s\nwant\n%s", seed, outline.Text, want)
		}
	}
}

func FuzzParseCommand(f *testing.F) {
	for _, s := range []string{
		`{"command":"create","id":"c1","doc":"project-notes","text":"Project notes"}`,
		`{"command":"insert","id":"c3","doc":"d","parent":"root","index":0,"text":"Goals"}`,
		`{"command":"move","id":"c5","doc":"d","node":"n2","parent":"n1"}`,
		`{"command":"find","doc":"d","text":"x"}`,
		`{"command":"list"}`,
		`{"command":"read","doc":"d\u0000"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := docmem.ParseCommand(data)
		if err != nil {
			var e *docmem.Error
			if !errors.As(err, &e) || e.Code == "" || e.Message == "" {
				t.Fatalf("an error without a code: %v", err)
			}
			return
		}
		if len(c.Text) > docmem.MaxTextBytes || len(c.ID) > docmem.MaxIDLen || len(c.Doc) > docmem.MaxIDLen {
			t.Fatalf("a command over the bounds parsed: %+v", c)
		}
		for _, id := range []string{c.ID, c.Doc, c.Node, c.Parent} {
			for _, r := range id {
				if r < 0x20 || r == 0x7f {
					t.Fatalf("an id with a control character parsed: %q", id)
				}
			}
		}
		b, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		again, err := docmem.ParseCommand(b)
		if err != nil || !cmp.Equal(c, again) {
			t.Fatalf("a valid command does not survive encoding: %+v -> %s -> %+v, %v", c, b, again, err)
		}
	})
}
