package memory

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/store/adapter"
)

var _ store.Store = (*Store)(nil)

// Store is an in-memory [store.Store]. The zero value is not usable: call
// [New]. All methods are safe for concurrent use.
type Store struct {
	mu     sync.RWMutex
	closed bool
	kinds  map[string]*table
	now    func() time.Time
}

// table holds the records of one kind and their ids in sorted order, so
// that List is a binary search and a scan of the matches. Writes do not
// keep the order, which would cost a shift of the ids per new record:
// new ids collect in added, deleted ones stay in ids, and List tidies up
// first (sort the new ids, merge, drop the deleted).
type table struct {
	recs  map[string]*store.Record
	ids   []string // sorted ascending; may hold deleted ids until tidy
	added []string // ids created since the last tidy, unsorted
	stale bool     // ids holds deleted ids
}

// tidy makes ids exactly the sorted ids of recs. s.mu must be held for
// writing.
func (t *table) tidy() {
	if len(t.added) == 0 && !t.stale {
		return
	}
	slices.Sort(t.added)
	merged := make([]string, 0, len(t.recs))
	i, j := 0, 0
	for i < len(t.ids) || j < len(t.added) {
		var id string
		if j == len(t.added) || (i < len(t.ids) && t.ids[i] <= t.added[j]) {
			id, i = t.ids[i], i+1
		} else {
			id, j = t.added[j], j+1
		}
		if _, ok := t.recs[id]; !ok || (len(merged) > 0 && merged[len(merged)-1] == id) {
			continue
		}
		merged = append(merged, id)
	}
	t.ids, t.added, t.stale = merged, nil, false
}

// New returns an empty Store.
func New() *Store {
	return &Store{kinds: make(map[string]*table), now: time.Now}
}

// Get returns a copy of the record, or [store.ErrNotFound].
func (s *Store) Get(ctx context.Context, kind, id string) (store.Record, error) {
	if err := adapter.CheckKey(kind, id); err != nil {
		return store.Record{}, err
	}
	if err := ctx.Err(); err != nil {
		return store.Record{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return store.Record{}, store.ErrClosed
	}
	if t := s.kinds[kind]; t != nil {
		if r := t.recs[id]; r != nil {
			return clone(r), nil
		}
	}
	return store.Record{}, fmt.Errorf("%w: %s/%s", store.ErrNotFound, kind, id)
}

// Put stores a copy of data if the record's version is version (0: the
// record must not exist) and returns the new version.
func (s *Store) Put(ctx context.Context, kind, id string, data []byte, version int64) (int64, error) {
	if err := adapter.CheckKey(kind, id); err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, store.ErrClosed
	}
	t := s.kinds[kind]
	var cur *store.Record
	if t != nil {
		cur = t.recs[id]
	}
	var stored int64
	if cur != nil {
		stored = cur.Version
	}
	if stored != version {
		return 0, fmt.Errorf("%w: %s/%s: have version %d, stored %d", store.ErrConflict, kind, id, version, stored)
	}
	if t == nil {
		t = &table{recs: make(map[string]*store.Record)}
		s.kinds[kind] = t
	}
	if cur == nil {
		t.added = append(t.added, id)
		cur = &store.Record{Kind: kind, ID: id}
		t.recs[id] = cur
	}
	cur.Version = version + 1
	cur.Data = copyBytes(data)
	cur.UpdatedAt = s.now()
	return cur.Version, nil
}

// Delete removes the record if its version is version, or whatever its
// version when version is 0. Deleting a missing record is not an error.
func (s *Store) Delete(ctx context.Context, kind, id string, version int64) error {
	if err := adapter.CheckKey(kind, id); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return store.ErrClosed
	}
	t := s.kinds[kind]
	if t == nil {
		return nil
	}
	cur := t.recs[id]
	if cur == nil {
		return nil
	}
	if version != 0 && cur.Version != version {
		return fmt.Errorf("%w: %s/%s: have version %d, stored %d", store.ErrConflict, kind, id, version, cur.Version)
	}
	delete(t.recs, id)
	t.stale = true
	if len(t.recs) == 0 {
		delete(s.kinds, kind)
	}
	return nil
}

// List returns copies of the records of kind whose id starts with prefix,
// ordered by id, at most limit of them (0 or less: no limit), starting after
// the id after.
func (s *Store) List(ctx context.Context, kind, prefix, after string, limit int) ([]store.Record, error) {
	if err := adapter.CheckKind(kind); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock() // tidy may write
	defer s.mu.Unlock()
	if s.closed {
		return nil, store.ErrClosed
	}
	t := s.kinds[kind]
	if t == nil {
		return nil, nil
	}
	t.tidy()
	i, _ := slices.BinarySearch(t.ids, prefix)
	if after >= prefix {
		j, found := slices.BinarySearch(t.ids, after)
		if found {
			j++
		}
		i = j
	}
	var out []store.Record
	for ; i < len(t.ids) && strings.HasPrefix(t.ids[i], prefix); i++ {
		if limit > 0 && len(out) == limit {
			break
		}
		out = append(out, clone(t.recs[t.ids[i]]))
	}
	return out, nil
}

// Close drops every record. Later calls return [store.ErrClosed]; Close
// itself may be called more than once.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.kinds = nil
	return nil
}

func clone(r *store.Record) store.Record {
	c := *r
	c.Data = copyBytes(r.Data)
	return c
}

// copyBytes returns a copy of b that is never nil, so that empty data reads
// back the same way whether it was written as nil or as an empty slice.
func copyBytes(b []byte) []byte {
	c := make([]byte, len(b))
	copy(c, b)
	return c
}
