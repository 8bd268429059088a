package reactive_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/calf-go/calf/reactive"
)

type doc struct {
	Title string            `json:"title"`
	Tags  []string          `json:"tags,omitempty"`
	Meta  map[string]string `json:"meta,omitempty"`
}

type langState struct {
	Language string `json:"language"`
	Uses     int    `json:"uses"`
}

type appState struct {
	Docs    []doc     `json:"docs"`
	Summary string    `json:"summary"`
	Lang    langState `json:"lang"`
	Count   int       `json:"count"`
}

// langActions is a part of the state with actions of its own, usable alone
// and mounted in the app's.
func langActions() *reactive.Actions[langState] {
	a := &reactive.Actions[langState]{}
	reactive.MustAction(a, "set", func(s langState, lang string) (langState, []string, error) {
		if lang == "" {
			return s, nil, errors.New("a language is required")
		}
		if lang == s.Language {
			return s, nil, nil
		}
		s.Language = lang
		s.Uses++
		return s, []string{"language", "uses"}, nil
	})
	return a
}

func appActions(t *testing.T) *reactive.Actions[appState] {
	a := &reactive.Actions[appState]{}
	reactive.MustAction(a, "add_doc", func(s appState, d doc) (appState, []string, error) {
		s.Docs = append(slices.Clone(s.Docs), d) // copy on write
		return s, []string{"docs." + itoa(len(s.Docs)-1)}, nil
	})
	reactive.MustAction(a, "tag", func(s appState, p struct {
		Doc int    `json:"doc"`
		Tag string `json:"tag"`
	}) (appState, []string, error) {
		docs := slices.Clone(s.Docs)
		d := docs[p.Doc]
		d.Tags = append(slices.Clone(d.Tags), p.Tag)
		d.Meta = maps.Clone(d.Meta)
		if d.Meta == nil {
			d.Meta = map[string]string{}
		}
		d.Meta["tagged"] = "yes"
		docs[p.Doc] = d
		s.Docs = docs
		return s, []string{"docs." + itoa(p.Doc) + ".tags", "docs." + itoa(p.Doc) + ".meta.tagged"}, nil
	})
	reactive.MustAction(a, "summarize", func(s appState, text string) (appState, []string, error) {
		s.Summary = text
		return s, []string{"summary"}, nil
	})
	reactive.MustAction(a, "inc", func(s appState, _ struct{}) (appState, []string, error) {
		s.Count++
		return s, []string{"count"}, nil
	})
	if err := reactive.Mount(a, "lang", langActions(), func(s appState) langState { return s.Lang },
		func(s appState, l langState) appState { s.Lang = l; return s }); err != nil {
		t.Fatal(err)
	}
	return a
}

func itoa(i int) string { return strconv.Itoa(i) }

// Actions change the state through deltas with before and after values;
// snapshots taken before a change keep what they saw.
func TestActionsAndDeltas(t *testing.T) {
	ctx := context.Background()
	s, err := reactive.NewStore("app", appState{}, appActions(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	d, err := s.Dispatch(ctx, "add_doc", doc{Title: "Cats"})
	if err != nil {
		t.Fatal(err)
	}
	if d.Version != 1 || d.Action != "add_doc" || !slices.Equal(d.Paths, []string{"docs.0"}) ||
		string(d.Before["docs.0"]) != "null" || string(d.After["docs.0"]) != `{"title":"Cats"}` || string(d.Payload) != `{"title":"Cats"}` {
		t.Errorf("delta %+v", d)
	}
	before := s.Get()
	d, err = s.Dispatch(ctx, "tag", map[string]any{"doc": 0, "tag": "pets"})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Get(); !slices.Equal(got.Docs[0].Tags, []string{"pets"}) || got.Docs[0].Meta["tagged"] != "yes" {
		t.Errorf("after tag: %+v", got)
	}
	if before.Docs[0].Tags != nil || before.Docs[0].Meta != nil {
		t.Errorf("the snapshot taken before changed: %+v", before.Docs[0])
	}
	if string(d.After["docs.0.meta.tagged"]) != `"yes"` || string(d.Before["docs.0.meta.tagged"]) != "null" {
		t.Errorf("tag delta %+v", d)
	}
	// A mounted part's action: its paths under the mount path.
	d, err = s.Dispatch(ctx, "lang.set", "fr")
	if err != nil || !slices.Equal(d.Paths, []string{"lang.language", "lang.uses"}) || string(d.After["lang.language"]) != `"fr"` {
		t.Errorf("lang.set: %+v, %v", d, err)
	}
	// No change, no delta, no version.
	if d, err := s.Dispatch(ctx, "lang.set", "fr"); d != nil || err != nil || s.Version() != 3 {
		t.Errorf("an action that changes nothing: %+v, %v, version %d", d, err, s.Version())
	}
	// Errors: unknown action, bad payload, the action's own error.
	if _, err := s.Dispatch(ctx, "nope", nil); !errors.Is(err, reactive.ErrUnknownAction) {
		t.Errorf("unknown action: %v", err)
	}
	if _, err := s.Dispatch(ctx, "lang.set", 42); !errors.Is(err, reactive.ErrPayload) {
		t.Errorf("bad payload: %v", err)
	}
	if _, err := s.Dispatch(ctx, "lang.set", ""); err == nil || s.Get().Lang.Language != "fr" {
		t.Errorf("an action's error: %v, state %+v", err, s.Get().Lang)
	}
	// The part on its own.
	alone, err := reactive.NewStore("lang", langState{}, langActions(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := alone.Dispatch(ctx, "set", "de"); err != nil || !slices.Equal(d.Paths, []string{"language", "uses"}) {
		t.Errorf("the part alone: %+v, %v", d, err)
	}
	if got := s.Actions().Names(); !slices.Equal(got, []string{"add_doc", "inc", "lang.set", "summarize", "tag"}) {
		t.Errorf("actions %v", got)
	}
}

// Subscribers get the deltas that concern their paths, once, in order.
func TestPathSubscriptions(t *testing.T) {
	ctx := context.Background()
	s, err := reactive.NewStore("app", appState{}, appActions(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	got := map[string][]string{}
	for _, p := range []string{"", "lang.*", "docs.*.tags", "summary", "count"} {
		s.Subscribe(p, func(d *reactive.Delta) {
			mu.Lock()
			got[p] = append(got[p], d.Action)
			mu.Unlock()
		})
	}
	stop := s.Subscribe("summary", func(*reactive.Delta) { t.Error("an ended subscription was called") })
	stop()
	for _, a := range []struct {
		name    string
		payload any
	}{{"add_doc", doc{Title: "a"}}, {"lang.set", "it"}, {"tag", map[string]any{"doc": 0, "tag": "x"}}, {"summarize", "short"}} {
		if _, err := s.Dispatch(ctx, a.name, a.payload); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string][]string{
		"":            {"add_doc", "lang.set", "tag", "summarize"},
		"lang.*":      {"lang.set"},
		"docs.*.tags": {"add_doc", "tag"}, // add_doc replaced docs.0, and with it its tags
		"summary":     {"summarize"},
	}
	for p, w := range want {
		if !slices.Equal(got[p], w) {
			t.Errorf("subscription %q got %v, want %v", p, got[p], w)
		}
	}
	if len(got["count"]) != 0 {
		t.Errorf("count: %v", got["count"])
	}
	// Concurrent dispatches: each delta once, in version order.
	var versions []int64
	s.Subscribe("count", func(d *reactive.Delta) { versions = append(versions, d.Version) })
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if _, err := s.Dispatch(ctx, "inc", nil); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if len(versions) != 50 || !slices.IsSorted(versions) || s.Get().Count != 50 {
		t.Errorf("%d notifications, sorted %t, count %d", len(versions), slices.IsSorted(versions), s.Get().Count)
	}
}

// Undo takes changes back path by path, Redo does them again; a new
// change forgets what was undone.
func TestUndoRedo(t *testing.T) {
	ctx := context.Background()
	s, err := reactive.NewStore("app", appState{}, appActions(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	s.Subscribe("", func(d *reactive.Delta) { actions = append(actions, d.Action) })
	mustDispatch(t, s, "summarize", "one")
	mustDispatch(t, s, "add_doc", doc{Title: "a", Meta: map[string]string{"k": "v"}})
	mustDispatch(t, s, "summarize", "two")
	if _, err := s.Undo(ctx); err != nil {
		t.Fatal(err)
	}
	if got := s.Get().Summary; got != "one" {
		t.Errorf("after undo: summary %q", got)
	}
	if _, err := s.Undo(ctx); err != nil {
		t.Fatal(err)
	}
	if got := s.Get(); len(got.Docs) != 0 {
		t.Errorf("after the second undo: docs %+v", got.Docs)
	}
	if _, err := s.Redo(ctx); err != nil {
		t.Fatal(err)
	}
	if got := s.Get(); len(got.Docs) != 1 || got.Docs[0].Meta["k"] != "v" {
		t.Errorf("after redo: %+v", got.Docs)
	}
	mustDispatch(t, s, "summarize", "three")
	if _, err := s.Redo(ctx); !errors.Is(err, reactive.ErrNoHistory) {
		t.Errorf("redo after a new change: %v", err)
	}
	if strings.Join(actions, " ") != "summarize add_doc summarize undo undo redo summarize" {
		t.Errorf("deltas %v", actions)
	}
	empty, _ := reactive.NewStore("e", appState{}, appActions(t), nil)
	if _, err := empty.Undo(ctx); !errors.Is(err, reactive.ErrNoHistory) {
		t.Errorf("undo with no history: %v", err)
	}
}

func mustDispatch[S any](t *testing.T, s *reactive.Store[S], name string, payload any) *reactive.Delta {
	t.Helper()
	d, err := s.Dispatch(context.Background(), name, payload)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestMatchPath(t *testing.T) {
	for _, tc := range []struct {
		pattern, path string
		want          bool
	}{
		{"agents.translator.*", "agents.translator.should_act", true},
		{"agents.translator.*", "agents.translator", true},
		{"agents.translator.*", "agents", true},
		{"agents.translator.*", "agents.summarizer.should_act", false},
		{"agents.*.should_act", "agents.summarizer.should_act", true},
		{"agents.*.should_act", "agents.summarizer.current_config", false},
		{"", "x", true},
		{"docs", "docs.3.title", true},
	} {
		if got := reactive.MatchPath(tc.pattern, tc.path); got != tc.want {
			t.Errorf("MatchPath(%q, %q) = %t", tc.pattern, tc.path, got)
		}
	}
}
