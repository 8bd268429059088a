package store_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/calf-go/calf/store"
	storemem "github.com/calf-go/calf/store/memory"
)

// countingStore counts the reads of the store it wraps.
type countingStore struct {
	store.Store
	gets atomic.Int64
}

func (c *countingStore) Get(ctx context.Context, kind, id string) (store.Record, error) {
	c.gets.Add(1)
	return c.Store.Get(ctx, kind, id)
}

func TestCreateOrUpdate(t *testing.T) {
	ctx := t.Context()
	s := &countingStore{Store: storemem.New()}
	var seen []string // what fn was applied to
	fn := func(data []byte, exists bool) ([]byte, error) {
		if !exists {
			seen = append(seen, "(none)")
			return []byte("new"), nil
		}
		seen = append(seen, string(data))
		return append([]byte("after "), data...), nil
	}

	// A new record: written create-only, without a read.
	rec, err := store.CreateOrUpdate(ctx, s, "k", "a", fn)
	if err != nil || rec.Version != 1 || string(rec.Data) != "new" {
		t.Fatalf("create: %+v, %v", rec, err)
	}
	if n := s.gets.Load(); n != 0 {
		t.Errorf("creating read the store %d times, want 0", n)
	}

	// An existing record: the create conflicts, and fn is applied to the
	// stored data, as Update does.
	seen = nil
	rec, err = store.CreateOrUpdate(ctx, s, "k", "a", fn)
	if err != nil || rec.Version != 2 || string(rec.Data) != "after new" {
		t.Fatalf("update: %+v, %v", rec, err)
	}
	if len(seen) != 2 || seen[0] != "(none)" || seen[1] != "new" {
		t.Errorf("fn applied to %q, want (none) then the stored data", seen)
	}
	got, err := s.Get(ctx, "k", "a")
	if err != nil || string(got.Data) != "after new" || got.Version != 2 {
		t.Errorf("stored %+v, %v", got, err)
	}

	// An error from fn is returned, and nothing is written.
	boom := errors.New("boom")
	if _, err := store.CreateOrUpdate(ctx, s, "k", "b", func([]byte, bool) ([]byte, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Errorf("err = %v, want %v", err, boom)
	}
	if _, err := s.Get(ctx, "k", "b"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a failed fn wrote a record: %v", err)
	}

	// fn writing nothing for a new record: nothing is written.
	rec, err = store.CreateOrUpdate(ctx, s, "k", "c", func([]byte, bool) ([]byte, error) { return nil, nil })
	if err != nil || rec.Version != 0 {
		t.Errorf("no write: %+v, %v", rec, err)
	}
	if _, err := s.Get(ctx, "k", "c"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("fn returned nothing, but a record was written: %v", err)
	}
}

func TestUpdateFrom(t *testing.T) {
	ctx := t.Context()
	s := &countingStore{Store: storemem.New()}
	v, err := s.Put(ctx, "k", "a", []byte("one"), 0)
	if err != nil {
		t.Fatal(err)
	}
	known := store.Record{Kind: "k", ID: "a", Version: v, Data: []byte("one")}
	var seen []string
	appendX := func(data []byte, exists bool) ([]byte, error) {
		seen = append(seen, string(data))
		return append(append([]byte(nil), data...), 'x'), nil
	}

	// A current copy: written at its version, without a read.
	rec, err := store.UpdateFrom(ctx, s, known, appendX)
	if err != nil || rec.Version != 2 || string(rec.Data) != "onex" {
		t.Fatalf("from a current copy: %+v, %v", rec, err)
	}
	if n := s.gets.Load(); n != 0 {
		t.Errorf("a current copy read the store %d times, want 0", n)
	}

	// A stale copy (version 1, the record is at 2): the write conflicts,
	// and fn is applied again to the stored data.
	seen = nil
	rec, err = store.UpdateFrom(ctx, s, known, appendX)
	if err != nil || rec.Version != 3 || string(rec.Data) != "onexx" {
		t.Fatalf("from a stale copy: %+v, %v", rec, err)
	}
	if len(seen) != 2 || seen[0] != "one" || seen[1] != "onex" {
		t.Errorf("fn applied to %q, want the copy, then the stored data", seen)
	}

	// fn finds nothing to write in the copy: the stored data decides.
	seen = nil
	onlyIfX := func(data []byte, exists bool) ([]byte, error) {
		seen = append(seen, string(data))
		if len(data) > 0 && data[len(data)-1] == 'x' {
			return []byte("done"), nil
		}
		return nil, nil
	}
	rec, err = store.UpdateFrom(ctx, s, known, onlyIfX)
	if err != nil || rec.Version != 4 || string(rec.Data) != "done" {
		t.Fatalf("nothing to write in the copy: %+v, %v", rec, err)
	}
	if len(seen) != 2 || seen[0] != "one" || seen[1] != "onexx" {
		t.Errorf("fn applied to %q, want the copy, then the stored data", seen)
	}

	// An error from fn is returned as is, and nothing is written.
	boom := errors.New("boom")
	if _, err := store.UpdateFrom(ctx, s, store.Record{Kind: "k", ID: "a", Version: 4, Data: []byte("done")},
		func([]byte, bool) ([]byte, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Errorf("fn's error: %v", err)
	}
	if got, _ := s.Get(ctx, "k", "a"); got.Version != 4 {
		t.Errorf("after fn's error the record is at version %d, want 4", got.Version)
	}

	// No copy (version 0): the same as Update.
	rec, err = store.UpdateFrom(ctx, s, store.Record{Kind: "k", ID: "a"}, appendX)
	if err != nil || rec.Version != 5 || string(rec.Data) != "donex" {
		t.Fatalf("without a copy: %+v, %v", rec, err)
	}
}
