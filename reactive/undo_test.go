package reactive_test

import (
	"context"
	"reflect"
	"slices"
	"strconv"
	"testing"

	"github.com/calf-go/calf/reactive"
	storemem "github.com/calf-go/calf/store/memory"
)

type listState struct {
	Tags []string          `json:"tags"`
	Grid [][]int           `json:"grid"`
	Refs map[string]*doc   `json:"refs"`
	Sub  *langState        `json:"sub"`
	Keys map[string]string `json:"keys"`
}

// listActions change slices element by element, each action naming the
// indexes it changed, as an action that appends or removes would.
func listActions() *reactive.Actions[listState] {
	a := &reactive.Actions[listState]{}
	reactive.MustAction(a, "tag", func(s listState, tag string) (listState, []string, error) {
		s.Tags = append(slices.Clone(s.Tags), tag)
		return s, []string{"tags." + strconv.Itoa(len(s.Tags)-1)}, nil
	})
	// untag removes n tags from index i: every index from i on changes.
	reactive.MustAction(a, "untag", func(s listState, p struct{ I, N int }) (listState, []string, error) {
		var paths []string
		for j := p.I; j < len(s.Tags); j++ {
			paths = append(paths, "tags."+strconv.Itoa(j))
		}
		s.Tags = slices.Delete(slices.Clone(s.Tags), p.I, p.I+p.N)
		return s, paths, nil
	})
	reactive.MustAction(a, "add_row", func(s listState, row []int) (listState, []string, error) {
		s.Grid = append(slices.Clone(s.Grid), row)
		return s, []string{"grid." + strconv.Itoa(len(s.Grid)-1)}, nil
	})
	reactive.MustAction(a, "add_cell", func(s listState, p struct{ Row, V int }) (listState, []string, error) {
		grid := slices.Clone(s.Grid)
		grid[p.Row] = append(slices.Clone(grid[p.Row]), p.V)
		s.Grid = grid
		return s, []string{"grid." + strconv.Itoa(p.Row) + "." + strconv.Itoa(len(grid[p.Row])-1)}, nil
	})
	reactive.MustAction(a, "ref", func(s listState, p struct {
		Key string
		Doc *doc
	}) (listState, []string, error) {
		refs := make(map[string]*doc, len(s.Refs)+1)
		for k, v := range s.Refs {
			refs[k] = v
		}
		refs[p.Key] = p.Doc
		s.Refs = refs
		return s, []string{"refs." + p.Key}, nil
	})
	reactive.MustAction(a, "sub", func(s listState, lang string) (listState, []string, error) {
		s.Sub = &langState{Language: lang}
		return s, []string{"sub.language"}, nil
	})
	reactive.MustAction(a, "key", func(s listState, p struct{ K, V string }) (listState, []string, error) {
		keys := make(map[string]string, len(s.Keys)+1)
		for k, v := range s.Keys {
			keys[k] = v
		}
		keys[p.K] = p.V
		s.Keys = keys
		return s, []string{"keys." + p.K}, nil
	})
	return a
}

// Undo restores exactly the state before each change, and Redo the state
// after it: slices grow and shrink back, map entries and pointers that
// did not exist go away again.
func TestUndoRestoresExactState(t *testing.T) {
	ctx := context.Background()
	many := make([]string, 11)
	for i := range many {
		many[i] = "t" + strconv.Itoa(i)
	}
	for _, tc := range []struct {
		name    string
		initial listState
		action  string
		payload any
	}{
		{"append to a nil slice", listState{}, "tag", "pets"},
		{"append to an empty slice", listState{Tags: []string{}}, "tag", "pets"},
		{"append", listState{Tags: []string{"pets"}}, "tag", "cats"},
		{"remove the last", listState{Tags: []string{"pets", "cats"}}, "untag", map[string]int{"I": 1, "N": 1}},
		{"remove from the middle", listState{Tags: []string{"a", "b", "c"}}, "untag", map[string]int{"I": 1, "N": 1}},
		{"remove two of eleven", listState{Tags: many}, "untag", map[string]int{"I": 0, "N": 2}},
		{"remove all", listState{Tags: []string{"a"}}, "untag", map[string]int{"I": 0, "N": 1}},
		{"append a row", listState{Grid: [][]int{{1}}}, "add_row", []int{2, 3}},
		{"append a cell to a nested slice", listState{Grid: [][]int{{1}, {2}}}, "add_cell", map[string]int{"Row": 1, "V": 3}},
		{"append to a nil nested slice", listState{Grid: [][]int{nil}}, "add_cell", map[string]int{"Row": 0, "V": 3}},
		{"a new map entry", listState{Keys: map[string]string{"a": "1"}}, "key", map[string]string{"K": "b", "V": "2"}},
		{"an entry of a nil map", listState{}, "key", map[string]string{"K": "b", "V": "2"}},
		{"a nil entry replaced", listState{Refs: map[string]*doc{"a": nil}}, "ref", map[string]any{"Key": "a", "Doc": doc{Title: "x"}}},
		{"a nil entry added", listState{Refs: map[string]*doc{}}, "ref", map[string]any{"Key": "a"}},
		{"through a nil pointer", listState{}, "sub", "fr"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := reactive.NewStore("list", tc.initial, listActions(), nil)
			if err != nil {
				t.Fatal(err)
			}
			mustDispatch(t, s, tc.action, tc.payload)
			after := s.Get()
			for round := range 2 {
				if _, err := s.Undo(ctx); err != nil {
					t.Fatalf("undo %d: %v", round, err)
				}
				if got := s.Get(); !reflect.DeepEqual(got, tc.initial) {
					t.Errorf("after undo %d: %#v, want %#v", round, got, tc.initial)
				}
				if _, err := s.Redo(ctx); err != nil {
					t.Fatalf("redo %d: %v", round, err)
				}
				if got := s.Get(); !reflect.DeepEqual(got, after) {
					t.Errorf("after redo %d: %#v, want %#v", round, got, after)
				}
			}
		})
	}
}

// A tag appended and taken back leaves no empty tag behind, through
// several changes undone one by one and done again.
// In memory, and persisted in a state store.
func TestUndoAppendsInSequence(t *testing.T) {
	t.Run("memory", func(t *testing.T) { testUndoAppendsInSequence(t, nil) })
	t.Run("persisted", func(t *testing.T) {
		st := storemem.New()
		t.Cleanup(func() { _ = st.Close() })
		testUndoAppendsInSequence(t, &reactive.Options{State: st})
	})
}

func testUndoAppendsInSequence(t *testing.T, opts *reactive.Options) {
	ctx := context.Background()
	s, err := reactive.NewStore("list", listState{}, listActions(), opts)
	if err != nil {
		t.Fatal(err)
	}
	var states []listState
	for _, a := range []struct {
		name    string
		payload any
	}{{"tag", "pets"}, {"tag", "cats"}, {"add_row", []int{1}}, {"add_cell", map[string]int{"Row": 0, "V": 2}}, {"untag", map[string]int{"I": 0, "N": 1}}} {
		states = append(states, s.Get())
		mustDispatch(t, s, a.name, a.payload)
	}
	final := s.Get()
	for i := len(states) - 1; i >= 0; i-- {
		if _, err := s.Undo(ctx); err != nil {
			t.Fatal(err)
		}
		if got := s.Get(); !reflect.DeepEqual(got, states[i]) {
			t.Errorf("after undoing change %d: %#v, want %#v", i+1, got, states[i])
		}
	}
	if got := s.Get().Tags; got != nil {
		t.Errorf("tags after undoing everything: %#v", got)
	}
	for range states {
		if _, err := s.Redo(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := s.Get(); !reflect.DeepEqual(got, final) {
		t.Errorf("after redoing everything: %#v, want %#v", got, final)
	}
}
