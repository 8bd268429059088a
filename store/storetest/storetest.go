package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/calf-go/calf/store"
)

// Run runs the conformance suite against the stores newStore returns, one
// subtest per part of the contract. newStore is called once per subtest
// and must return a working store; it should register its own cleanup
// (t.Cleanup) to close the store.
func Run(t *testing.T, newStore func(t *testing.T) store.Store) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(*testing.T, store.Store)
	}{
		{"GetMissing", testGetMissing},
		{"Create", testCreate},
		{"CompareAndSwap", testCompareAndSwap},
		{"RoundTrip", testRoundTrip},
		{"KindsAreIndependent", testKindsAreIndependent},
		{"Delete", testDelete},
		{"RecreateAfterDelete", testRecreateAfterDelete},
		{"List", testList},
		{"ListPaging", testListPaging},
		{"ConcurrentUpdate", testConcurrentUpdate},
		{"ConcurrentCreate", testConcurrentCreate},
		{"Claim", testClaim},
		{"InvalidKey", testInvalidKey},
		{"MaxKeyLen", testMaxKeyLen},
		{"CancelledContext", testCancelledContext},
		{"Closed", testClosed},
		{"NoAliasing", testNoAliasing},
		{"UpdatedAt", testUpdatedAt},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.fn(t, newStore(t))
		})
	}
}

// newKind returns a kind no earlier run has used, so that stores sharing
// a backend do not see each other's records.
func newKind(name string) string {
	return fmt.Sprintf("storetest-%s-%016x", name, rand.Uint64())
}

// equateRecords compares records treating nil and empty Data as equal
// and ignoring UpdatedAt, which the UpdatedAt subtest checks on its own.
var equateRecords = cmp.Options{
	cmpopts.EquateEmpty(),
	cmpopts.IgnoreFields(store.Record{}, "UpdatedAt"),
}

func put(t *testing.T, s store.Store, kind, id string, data []byte, version int64) int64 {
	t.Helper()
	v, err := s.Put(t.Context(), kind, id, data, version)
	if err != nil {
		t.Fatalf("Put(%q, %q, version %d): %v", kind, id, version, err)
	}
	if v != version+1 {
		t.Fatalf("Put(%q, %q, version %d) = version %d, want %d", kind, id, version, v, version+1)
	}
	return v
}

func get(t *testing.T, s store.Store, kind, id string) store.Record {
	t.Helper()
	rec, err := s.Get(t.Context(), kind, id)
	if err != nil {
		t.Fatalf("Get(%q, %q): %v", kind, id, err)
	}
	return rec
}

// wantRecord checks that the stored record is exactly want.
func wantRecord(t *testing.T, s store.Store, want store.Record) {
	t.Helper()
	got := get(t, s, want.Kind, want.ID)
	if diff := cmp.Diff(want, got, equateRecords); diff != "" {
		t.Errorf("Get(%q, %q) mismatch (-want +got):\n%s", want.Kind, want.ID, diff)
	}
}

func wantMissing(t *testing.T, s store.Store, kind, id string) {
	t.Helper()
	if rec, err := s.Get(t.Context(), kind, id); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get(%q, %q) = %+v, %v; want %v", kind, id, rec, err, store.ErrNotFound)
	}
}

func testGetMissing(t *testing.T, s store.Store) {
	kind := newKind("missing")
	wantMissing(t, s, kind, "nothing")
	put(t, s, kind, "other", []byte("x"), 0)
	wantMissing(t, s, kind, "nothing")
	wantMissing(t, s, kind, "othe")
	wantMissing(t, s, kind, "other2")
}

func testCreate(t *testing.T, s store.Store) {
	kind := newKind("create")
	put(t, s, kind, "a", []byte("first"), 0)
	wantRecord(t, s, store.Record{Kind: kind, ID: "a", Version: 1, Data: []byte("first")})

	v, err := s.Put(t.Context(), kind, "a", []byte("second"), 0)
	if !errors.Is(err, store.ErrConflict) {
		t.Fatalf("second create: Put = %d, %v; want %v", v, err, store.ErrConflict)
	}
	wantRecord(t, s, store.Record{Kind: kind, ID: "a", Version: 1, Data: []byte("first")})
}

func testCompareAndSwap(t *testing.T, s store.Store) {
	tests := []struct {
		name    string
		version int64
		ok      bool
	}{
		{"current", 2, true},
		{"stale", 1, false},
		{"future", 3, false},
		{"far future", 1 << 40, false},
		{"create over existing", 0, false},
	}
	kind := newKind("cas")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			put(t, s, kind, tt.name, []byte("v1"), 0)
			put(t, s, kind, tt.name, []byte("v2"), 1)
			v, err := s.Put(t.Context(), kind, tt.name, []byte("next"), tt.version)
			if tt.ok {
				if err != nil || v != tt.version+1 {
					t.Fatalf("Put(version %d) = %d, %v; want %d, nil", tt.version, v, err, tt.version+1)
				}
				wantRecord(t, s, store.Record{Kind: kind, ID: tt.name, Version: 3, Data: []byte("next")})
				return
			}
			if !errors.Is(err, store.ErrConflict) {
				t.Fatalf("Put(version %d) = %d, %v; want %v", tt.version, v, err, store.ErrConflict)
			}
			wantRecord(t, s, store.Record{Kind: kind, ID: tt.name, Version: 2, Data: []byte("v2")})
		})
	}

	t.Run("missing record with a version", func(t *testing.T) {
		v, err := s.Put(t.Context(), kind, "missing", []byte("x"), 1)
		if !errors.Is(err, store.ErrConflict) {
			t.Fatalf("Put(version 1) of a missing record = %d, %v; want %v", v, err, store.ErrConflict)
		}
		wantMissing(t, s, kind, "missing")
	})

	t.Run("many writes", func(t *testing.T) {
		var v int64
		for i := range 20 {
			v = put(t, s, kind, "many", []byte(strconv.Itoa(i)), v)
		}
		wantRecord(t, s, store.Record{Kind: kind, ID: "many", Version: 20, Data: []byte("19")})
	})
}

func testRoundTrip(t *testing.T, s store.Store) {
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	big := make([]byte, 1<<20)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range big {
		big[i] = byte(rng.Uint32())
	}
	tests := []struct {
		name string
		data []byte
	}{
		{"text", []byte("hello, world")},
		{"every byte", all},
		{"zeros", make([]byte, 100)},
		{"invalid utf8", []byte{0xff, 0xfe, 0xc3, 0x28, 0x00}},
		{"json", []byte(`{"a":[1,2,3],"b":"\u00e9"}`)},
		{"empty", []byte{}},
		{"nil", nil},
		{"1MiB", big},
	}
	kind := newKind("roundtrip")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			put(t, s, kind, tt.name, tt.data, 0)
			got := get(t, s, kind, tt.name)
			if !bytes.Equal(got.Data, tt.data) {
				t.Fatalf("Get returned %d bytes that differ from the %d written", len(got.Data), len(tt.data))
			}
			// Overwriting with the same data keeps it byte for byte too.
			put(t, s, kind, tt.name, tt.data, 1)
			if got := get(t, s, kind, tt.name); !bytes.Equal(got.Data, tt.data) || got.Version != 2 {
				t.Fatalf("after rewrite: Get = version %d, %d bytes; want version 2, the %d written", got.Version, len(got.Data), len(tt.data))
			}
		})
	}
}

func testKindsAreIndependent(t *testing.T, s store.Store) {
	a, b := newKind("a"), newKind("b")
	put(t, s, a, "same", []byte("in a"), 0)
	wantMissing(t, s, b, "same")

	// Creating in b is not a conflict with a, and versions are per record.
	put(t, s, b, "same", []byte("in b"), 0)
	put(t, s, b, "same", []byte("in b again"), 1)
	wantRecord(t, s, store.Record{Kind: a, ID: "same", Version: 1, Data: []byte("in a")})
	wantRecord(t, s, store.Record{Kind: b, ID: "same", Version: 2, Data: []byte("in b again")})

	if err := s.Delete(t.Context(), a, "same", 0); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	wantMissing(t, s, a, "same")
	wantRecord(t, s, store.Record{Kind: b, ID: "same", Version: 2, Data: []byte("in b again")})

	// A kind that is a prefix of another is a different kind.
	c := a + "x"
	put(t, s, c, "same", []byte("in c"), 0)
	wantMissing(t, s, a, "same")
}

func testDelete(t *testing.T, s store.Store) {
	tests := []struct {
		name    string
		exists  bool // the record is at version 2 before the Delete
		version int64
		wantErr error
		deleted bool
	}{
		{"current version", true, 2, nil, true},
		{"stale version", true, 1, store.ErrConflict, false},
		{"future version", true, 3, store.ErrConflict, false},
		{"unconditional", true, 0, nil, true},
		{"missing unconditional", false, 0, nil, true},
		{"missing with a version", false, 4, nil, true},
	}
	kind := newKind("delete")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.exists {
				put(t, s, kind, tt.name, []byte("v1"), 0)
				put(t, s, kind, tt.name, []byte("v2"), 1)
			}
			err := s.Delete(t.Context(), kind, tt.name, tt.version)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Fatalf("Delete(version %d) = %v, want %v", tt.version, err, tt.wantErr)
			}
			if tt.deleted {
				wantMissing(t, s, kind, tt.name)
			} else {
				wantRecord(t, s, store.Record{Kind: kind, ID: tt.name, Version: 2, Data: []byte("v2")})
			}
		})
	}

	t.Run("twice", func(t *testing.T) {
		put(t, s, kind, "twice", []byte("x"), 0)
		for range 2 {
			if err := s.Delete(t.Context(), kind, "twice", 1); err != nil {
				t.Fatalf("Delete: %v", err)
			}
		}
		wantMissing(t, s, kind, "twice")
	})

	t.Run("others untouched", func(t *testing.T) {
		put(t, s, kind, "keep", []byte("keep"), 0)
		put(t, s, kind, "keep2", []byte("keep2"), 0)
		put(t, s, kind, "kee", []byte("gone"), 0)
		if err := s.Delete(t.Context(), kind, "kee", 1); err != nil {
			t.Fatalf("Delete: %v", err)
		}
		wantMissing(t, s, kind, "kee")
		wantRecord(t, s, store.Record{Kind: kind, ID: "keep", Version: 1, Data: []byte("keep")})
		wantRecord(t, s, store.Record{Kind: kind, ID: "keep2", Version: 1, Data: []byte("keep2")})
	})
}

func testRecreateAfterDelete(t *testing.T, s store.Store) {
	kind := newKind("recreate")
	put(t, s, kind, "r", []byte("one"), 0)
	put(t, s, kind, "r", []byte("two"), 1)
	if err := s.Delete(t.Context(), kind, "r", 2); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	// The old version no longer matches anything.
	if v, err := s.Put(t.Context(), kind, "r", []byte("stale"), 2); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("Put(version 2) after Delete = %d, %v; want %v", v, err, store.ErrConflict)
	}
	wantMissing(t, s, kind, "r")
	put(t, s, kind, "r", []byte("again"), 0)
	wantRecord(t, s, store.Record{Kind: kind, ID: "r", Version: 1, Data: []byte("again")})
}

// listIDs are the ids the List subtests store. They include the characters
// that pattern-matching implementations of a prefix get wrong (% _ \ [ *),
// ids that are prefixes of others, upper and lower case, and multi-byte
// characters, whose order must be the order of their bytes.
var listIDs = []string{
	"x", "x/1", "x/2", "x/10", "x/1/a", "x%", "x%1", "x_", "x_1", "xa", "xA", "xb",
	"x1", `x\`, `x\1`, "x[", "x[1]", "x*", "x.1", "x 1", "x'q", `x"q`, "xé", "xÿ", "x世界",
	"X", "Xa", "a", "y", "y/1", "z", "~", "é",
}

// setupList stores listIDs in a kind, and decoys in a second kind, and
// returns the first kind and what each id holds.
func setupList(t *testing.T, s store.Store) (string, map[string]store.Record) {
	t.Helper()
	kind, other := newKind("list"), newKind("listother")
	want := make(map[string]store.Record)
	for i, id := range listIDs {
		data := []byte("data of " + id)
		v := put(t, s, kind, id, []byte("old"), 0)
		if i%3 == 0 { // some records are at version 2
			v = put(t, s, kind, id, data, v)
		} else {
			data = []byte("old")
		}
		want[id] = store.Record{Kind: kind, ID: id, Version: v, Data: data}
	}
	// Decoys: the same ids and ids that would match the prefixes, in
	// another kind and in a kind the first is a prefix of.
	for _, id := range []string{"x", "x/3", "x%2", "x_2", "xz", "w"} {
		put(t, s, other, id, []byte("decoy"), 0)
		put(t, s, kind+"x", id, []byte("decoy"), 0)
	}
	return kind, want
}

// expectList is the reference answer to List over want.
func expectList(want map[string]store.Record, prefix, after string, limit int) []store.Record {
	var ids []string
	for id := range want {
		if strings.HasPrefix(id, prefix) && id > after {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	if limit > 0 && len(ids) > limit {
		ids = ids[:limit]
	}
	var out []store.Record
	for _, id := range ids {
		out = append(out, want[id])
	}
	return out
}

var listPrefixes = []string{
	"", "x", "x/", "x/1", "x%", "x_", `x\`, "x[", "x*", "x.", "x'", "xé", "x世", "X", "é", "nomatch", "x/10/more",
}

func testList(t *testing.T, s store.Store) {
	kind, want := setupList(t, s)
	afters := []string{"", "x", "x/1", "x/15", "x_", "w", "xé", "zzz", "\U0010ffff"}
	limits := []int{0, 1, 3, 1000}
	for _, prefix := range listPrefixes {
		for _, after := range afters {
			for _, limit := range limits {
				got, err := s.List(t.Context(), kind, prefix, after, limit)
				if err != nil {
					t.Fatalf("List(prefix %q, after %q, limit %d): %v", prefix, after, limit, err)
				}
				exp := expectList(want, prefix, after, limit)
				if diff := cmp.Diff(exp, got, equateRecords); diff != "" {
					t.Errorf("List(prefix %q, after %q, limit %d) mismatch (-want +got):\n%s", prefix, after, limit, diff)
				}
			}
		}
	}

	t.Run("empty kind", func(t *testing.T) {
		got, err := s.List(t.Context(), newKind("empty"), "", "", 0)
		if err != nil || len(got) != 0 {
			t.Fatalf("List of an unused kind = %v, %v; want nothing", got, err)
		}
	})
}

func testListPaging(t *testing.T, s store.Store) {
	kind, want := setupList(t, s)
	for _, prefix := range listPrefixes {
		for _, limit := range []int{1, 2, 5} {
			var got []store.Record
			after := ""
			for page := 0; ; page++ {
				if page > len(listIDs) {
					t.Fatalf("prefix %q limit %d: paging does not end", prefix, limit)
				}
				recs, err := s.List(t.Context(), kind, prefix, after, limit)
				if err != nil {
					t.Fatalf("List(prefix %q, after %q, limit %d): %v", prefix, after, limit, err)
				}
				if len(recs) > limit {
					t.Fatalf("List(limit %d) returned %d records", limit, len(recs))
				}
				got = append(got, recs...)
				if len(recs) < limit {
					break
				}
				after = recs[len(recs)-1].ID
			}
			if diff := cmp.Diff(expectList(want, prefix, "", 0), got, equateRecords); diff != "" {
				t.Errorf("pages of prefix %q, limit %d mismatch (-want +got):\n%s", prefix, limit, diff)
			}
		}
	}
}

func testConcurrentUpdate(t *testing.T, s store.Store) {
	const workers, perWorker = 16, 25
	kind := newKind("counter")
	incr := func(data []byte, exists bool) ([]byte, error) {
		n := 0
		if exists {
			var err error
			if n, err = strconv.Atoi(string(data)); err != nil {
				return nil, fmt.Errorf("counter holds %q: %w", data, err)
			}
		}
		return []byte(strconv.Itoa(n + 1)), nil
	}

	var (
		mu       sync.Mutex
		versions = make(map[int64]int)
		wg       sync.WaitGroup
		start    = make(chan struct{})
	)
	for range workers {
		wg.Go(func() {
			<-start
			for done, conflicts := 0, 0; done < perWorker; {
				rec, err := store.Update(t.Context(), s, kind, "c", incr)
				if errors.Is(err, store.ErrConflict) {
					// Update gave up after its own retries: the caller
					// may try again. Bound it so a broken store fails.
					if conflicts++; conflicts > 100 {
						t.Errorf("Update: %v (%d times)", err, conflicts)
						return
					}
					continue
				}
				if err != nil {
					t.Errorf("Update: %v", err)
					return
				}
				if string(rec.Data) != strconv.FormatInt(rec.Version, 10) {
					t.Errorf("Update returned version %d with data %q; each write adds one to both", rec.Version, rec.Data)
				}
				mu.Lock()
				versions[rec.Version]++
				mu.Unlock()
				done++
			}
		})
	}
	close(start)
	wg.Wait()
	if t.Failed() {
		return
	}
	const total = workers * perWorker
	wantRecord(t, s, store.Record{Kind: kind, ID: "c", Version: total, Data: []byte(strconv.Itoa(total))})
	for v := int64(1); v <= total; v++ {
		if versions[v] != 1 {
			t.Errorf("version %d was returned by %d successful Updates, want 1", v, versions[v])
		}
	}
}

func testConcurrentCreate(t *testing.T, s store.Store) {
	const workers, keys = 16, 8
	kind := newKind("race")
	for k := range keys {
		id := "key" + strconv.Itoa(k)
		var (
			wg      sync.WaitGroup
			start   = make(chan struct{})
			errs    = make([]error, workers)
			winners []int
		)
		for w := range workers {
			wg.Go(func() {
				<-start
				_, errs[w] = s.Put(t.Context(), kind, id, []byte("worker "+strconv.Itoa(w)), 0)
			})
		}
		close(start)
		wg.Wait()
		for w, err := range errs {
			switch {
			case err == nil:
				winners = append(winners, w)
			case !errors.Is(err, store.ErrConflict):
				t.Errorf("%s: worker %d: Put: %v", id, w, err)
			}
		}
		if len(winners) != 1 {
			t.Fatalf("%s: %d creates succeeded (workers %v), want exactly 1", id, len(winners), winners)
		}
		wantRecord(t, s, store.Record{Kind: kind, ID: id, Version: 1, Data: []byte("worker " + strconv.Itoa(winners[0]))})
	}
}

func testClaim(t *testing.T, s store.Store) {
	kind := newKind("claim")
	first, err := store.Claim(t.Context(), s, kind, "op", []byte("first"))
	if err != nil || !first {
		t.Fatalf("first Claim = %v, %v; want true, nil", first, err)
	}
	again, err := store.Claim(t.Context(), s, kind, "op", []byte("second"))
	if err != nil || again {
		t.Fatalf("second Claim = %v, %v; want false, nil", again, err)
	}
	wantRecord(t, s, store.Record{Kind: kind, ID: "op", Version: 1, Data: []byte("first")})

	const workers = 16
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		wins  int
		start = make(chan struct{})
	)
	for range workers {
		wg.Go(func() {
			<-start
			ok, err := store.Claim(t.Context(), s, kind, "concurrent", nil)
			if err != nil {
				t.Errorf("Claim: %v", err)
			}
			if ok {
				mu.Lock()
				wins++
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	if wins != 1 {
		t.Errorf("%d of %d concurrent Claims won, want 1", wins, workers)
	}
}

func testInvalidKey(t *testing.T, s store.Store) {
	long := strings.Repeat("k", store.MaxKeyLen+1)
	kind := newKind("invalid")
	tests := []struct {
		name     string
		kind, id string
	}{
		{"empty kind", "", "id"},
		{"empty id", kind, ""},
		{"both empty", "", ""},
		{"long kind", long, "id"},
		{"long id", kind, long},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			if _, err := s.Get(ctx, tt.kind, tt.id); !errors.Is(err, store.ErrInvalidKey) {
				t.Errorf("Get = %v, want %v", err, store.ErrInvalidKey)
			}
			if _, err := s.Put(ctx, tt.kind, tt.id, []byte("x"), 0); !errors.Is(err, store.ErrInvalidKey) {
				t.Errorf("Put = %v, want %v", err, store.ErrInvalidKey)
			}
			if err := s.Delete(ctx, tt.kind, tt.id, 0); !errors.Is(err, store.ErrInvalidKey) {
				t.Errorf("Delete = %v, want %v", err, store.ErrInvalidKey)
			}
		})
	}
	for _, k := range []string{"", long} {
		if _, err := s.List(t.Context(), k, "", "", 0); !errors.Is(err, store.ErrInvalidKey) {
			t.Errorf("List(kind of %d bytes) = %v, want %v", len(k), err, store.ErrInvalidKey)
		}
	}
	// Nothing was written under the valid kind of a key with a bad id.
	if recs, err := s.List(t.Context(), kind, "", "", 0); err != nil || len(recs) != 0 {
		t.Errorf("List(%q) = %v, %v; want nothing", kind, recs, err)
	}
}

func testMaxKeyLen(t *testing.T, s store.Store) {
	base := newKind("max")
	kind := base + strings.Repeat("k", store.MaxKeyLen-len(base))
	id := strings.Repeat("i", store.MaxKeyLen)
	put(t, s, kind, id, []byte("long"), 0)
	wantRecord(t, s, store.Record{Kind: kind, ID: id, Version: 1, Data: []byte("long")})
	recs, err := s.List(t.Context(), kind, id[:10], "", 0)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if diff := cmp.Diff([]store.Record{{Kind: kind, ID: id, Version: 1, Data: []byte("long")}}, recs, equateRecords); diff != "" {
		t.Errorf("List mismatch (-want +got):\n%s", diff)
	}
	if err := s.Delete(t.Context(), kind, id, 1); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	wantMissing(t, s, kind, id)
}

func testCancelledContext(t *testing.T, s store.Store) {
	kind := newKind("cancel")
	put(t, s, kind, "a", []byte("x"), 0)

	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	expired, cancel2 := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
	defer cancel2()

	for _, c := range []struct {
		name string
		ctx  context.Context
		want error
	}{
		{"cancelled", cancelled, context.Canceled},
		{"deadline exceeded", expired, context.DeadlineExceeded},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := s.Get(c.ctx, kind, "a"); !errors.Is(err, c.want) {
				t.Errorf("Get = %v, want %v", err, c.want)
			}
			if _, err := s.Put(c.ctx, kind, "b", []byte("y"), 0); !errors.Is(err, c.want) {
				t.Errorf("Put = %v, want %v", err, c.want)
			}
			if _, err := s.Put(c.ctx, kind, "a", []byte("y"), 1); !errors.Is(err, c.want) {
				t.Errorf("Put = %v, want %v", err, c.want)
			}
			if err := s.Delete(c.ctx, kind, "a", 0); !errors.Is(err, c.want) {
				t.Errorf("Delete = %v, want %v", err, c.want)
			}
			if _, err := s.List(c.ctx, kind, "", "", 0); !errors.Is(err, c.want) {
				t.Errorf("List = %v, want %v", err, c.want)
			}
			if _, err := store.Update(c.ctx, s, kind, "a", func([]byte, bool) ([]byte, error) {
				t.Error("Update called fn despite a done context")
				return []byte("z"), nil
			}); !errors.Is(err, c.want) {
				t.Errorf("Update = %v, want %v", err, c.want)
			}
		})
	}
	// The store still works with a live context.
	put(t, s, kind, "a", []byte("after"), 1)
}

func testClosed(t *testing.T, s store.Store) {
	kind := newKind("closed")
	put(t, s, kind, "a", []byte("x"), 0)
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	ctx := t.Context()
	if _, err := s.Get(ctx, kind, "a"); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Get after Close = %v, want %v", err, store.ErrClosed)
	}
	if _, err := s.Put(ctx, kind, "b", []byte("y"), 0); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Put after Close = %v, want %v", err, store.ErrClosed)
	}
	if _, err := s.Put(ctx, kind, "a", []byte("y"), 1); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Put after Close = %v, want %v", err, store.ErrClosed)
	}
	if err := s.Delete(ctx, kind, "a", 1); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Delete after Close = %v, want %v", err, store.ErrClosed)
	}
	if _, err := s.List(ctx, kind, "", "", 0); !errors.Is(err, store.ErrClosed) {
		t.Errorf("List after Close = %v, want %v", err, store.ErrClosed)
	}
}

func testNoAliasing(t *testing.T, s store.Store) {
	kind := newKind("alias")
	in := []byte("hello")
	put(t, s, kind, "a", in, 0)
	in[0] = 'J'
	want := store.Record{Kind: kind, ID: "a", Version: 1, Data: []byte("hello")}
	wantRecord(t, s, want)

	got := get(t, s, kind, "a")
	got.Data[0] = 'Y'
	_ = append(got.Data[:1], "ZZZZZZZZ"...)
	wantRecord(t, s, want)

	recs, err := s.List(t.Context(), kind, "", "", 0)
	if err != nil || len(recs) != 1 {
		t.Fatalf("List = %v, %v; want one record", recs, err)
	}
	recs[0].Data[0] = 'L'
	wantRecord(t, s, want)

	// The slice given to a compare-and-swap write is not kept either.
	in2 := []byte("world")
	put(t, s, kind, "a", in2, 1)
	in2[0] = 'J'
	wantRecord(t, s, store.Record{Kind: kind, ID: "a", Version: 2, Data: []byte("world")})
}

func testUpdatedAt(t *testing.T, s store.Store) {
	kind := newKind("updated")
	put(t, s, kind, "a", []byte("one"), 0)
	first := get(t, s, kind, "a")
	if first.UpdatedAt.IsZero() {
		t.Fatalf("UpdatedAt is zero after Put")
	}
	put(t, s, kind, "a", []byte("two"), 1)
	second := get(t, s, kind, "a")
	if second.UpdatedAt.IsZero() || second.UpdatedAt.Before(first.UpdatedAt) {
		t.Errorf("UpdatedAt went from %v to %v on a later write", first.UpdatedAt, second.UpdatedAt)
	}
	recs, err := s.List(t.Context(), kind, "", "", 0)
	if err != nil || len(recs) != 1 {
		t.Fatalf("List = %v, %v; want one record", recs, err)
	}
	if !recs[0].UpdatedAt.Equal(second.UpdatedAt) {
		t.Errorf("List UpdatedAt = %v, Get UpdatedAt = %v; want the same", recs[0].UpdatedAt, second.UpdatedAt)
	}
}
