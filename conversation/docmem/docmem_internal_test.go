package docmem

import (
	"errors"
	"strconv"
	"testing"
)

// TestMaxNodes fills a document to MaxNodes nodes directly (through the
// store it would take MaxNodes round trips): the next append is refused.
func TestMaxNodes(t *testing.T) {
	d := &document{Name: "many", Next: 1, Nodes: map[string]*node{Root: {Text: "T"}}}
	for i := 1; i < MaxNodes; i++ {
		if _, err := d.change(Command{Command: CmdAppend, ID: strconv.Itoa(i), Doc: "many", Parent: Root, Text: "x"}); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	_, err := d.change(Command{Command: CmdAppend, ID: "over", Doc: "many", Parent: Root, Text: "x"})
	if !errors.Is(err, ErrTooLarge) {
		t.Errorf("append past MaxNodes: %v, want ErrTooLarge", err)
	}
	if len(d.Nodes) != MaxNodes {
		t.Errorf("%d nodes, want %d", len(d.Nodes), MaxNodes)
	}
}
