package docmem_test

import (
	"fmt"
	"testing"

	"github.com/calf-go/calf/conversation/docmem"
	storemem "github.com/calf-go/calf/store/memory"
)

// BenchmarkChange measures a change (an update of one node's text, so
// that the size stays put) to a document of 10, 500 and 1,900 nodes of 100
// bytes on the memory store, next to its floor (the record read and
// written back unchanged): the document is read,
// decoded, changed, encoded and written whole.
func BenchmarkChange(b *testing.B) {
	for _, nodes := range []int{10, 500, 1900} {
		for _, floor := range []bool{true, false} {
			name := fmt.Sprint(nodes, "nodes")
			if floor {
				name += "/floor"
			}
			b.Run(name, func(b *testing.B) {
				s := storemem.New()
				defer s.Close()
				m := docmem.New(s, nil)
				conv := newConversationID()
				ctx := b.Context()
				if _, err := m.Apply(ctx, conv, docmem.Command{Command: docmem.CmdCreate, ID: "c", Doc: "d"}); err != nil {
					b.Fatal(err)
				}
				text := fmt.Sprintf("%0100d", 0)
				for i := range nodes {
					if _, err := m.Apply(ctx, conv, docmem.Command{Command: docmem.CmdAppend, ID: fmt.Sprint("p", i), Doc: "d", Parent: docmem.Root, Text: text}); err != nil {
						b.Fatal(err)
					}
				}
				// The document remembers its latest MaxApplied commands,
				// as it does in the loop.
				for i := range docmem.MaxApplied {
					if _, err := m.Apply(ctx, conv, docmem.Command{Command: docmem.CmdUpdate, ID: fmt.Sprint("w", i), Doc: "d", Node: "n1", Text: text}); err != nil {
						b.Fatal(err)
					}
				}
				if floor {
					// The floor: the record read and written back unchanged,
					// what the store costs without docmem's work.
					key := conv + "/d"
					for b.Loop() {
						rec, err := s.Get(ctx, docmem.KindDocument, key)
						if err != nil {
							b.Fatal(err)
						}
						if _, err := s.Put(ctx, docmem.KindDocument, key, rec.Data, rec.Version); err != nil {
							b.Fatal(err)
						}
					}
					return
				}
				i := 0
				for b.Loop() {
					res, err := m.Apply(ctx, conv, docmem.Command{Command: docmem.CmdUpdate, ID: fmt.Sprint("b", i), Doc: "d", Node: "n1", Text: text})
					if err != nil || !res.OK {
						b.Fatal(res.Error, err)
					}
					i++
				}
			})
		}
	}
}
