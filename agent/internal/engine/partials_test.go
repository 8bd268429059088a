package engine

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/calf-go/calf/tool"
)

// Partials decode the output as far as it has streamed, unwrap a wrapped
// schema's value, and make a partial only when the output changes.
func TestPartials(t *testing.T) {
	s, err := tool.SchemaFor[[]string]()
	if err != nil {
		t.Fatal(err)
	}
	if !s.Wrapped() {
		t.Fatal("a list's schema is not wrapped")
	}
	p := NewPartials(s, func(raw json.RawMessage) (any, error) {
		var v []string
		err := json.Unmarshal(raw, &v)
		return v, err
	})
	var got [][]string
	for _, text := range []string{`{"output":`, `["a`, `", "b"`, `,`} {
		if part, ok := p.Add("r", 1, text); ok {
			if part.Run != "r" || part.Step != 1 {
				t.Errorf("partial of run %q step %d", part.Run, part.Step)
			}
			got = append(got, part.Value.([]string))
		}
	}
	if _, ok := p.Flush(); ok {
		t.Error("a flush of text already taken made a partial")
	}
	if !p.Streams("r", 1) || p.Streams("r", 2) {
		t.Error("Streams does not name the step streamed")
	}
	want := [][]string{{"a"}, {"a", "b"}} // none before the value begins
	if len(got) != len(want) {
		t.Fatalf("partials %q, want %q", got, want)
	}
	for i := range want {
		if !slices.Equal(got[i], want[i]) {
			t.Errorf("partial %d = %q, want %q", i, got[i], want[i])
		}
	}
}
