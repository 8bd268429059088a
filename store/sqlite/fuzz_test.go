package sqlite_test

import (
	"bytes"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/store/adapter"
	"github.com/calf-go/calf/store/sqlite"
)

// FuzzList stores the ids the fuzzer makes up (one per line) and checks
// that they read back byte for byte and that List agrees with a plain
// filter and sort of them.
func FuzzList(f *testing.F) {
	s, err := sqlite.Open(filepath.Join(f.TempDir(), "calf.db"), nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { s.Close() })
	for _, seed := range []struct {
		ids, prefix, after string
		limit              int
	}{
		{"a\nb\nc", "", "", 0},
		{"x%\nx_\nxa\nx\\", "x_", "", 2},
		{"é\nê\ne\xff\ne", "e", "e", 1},
		{"\xff\xfe\n\xff\xff\n\xff", "\xff", "\xff", 0},
		{"a\x00b\na\na\x00", "a", "", 0},
	} {
		f.Add(seed.ids, seed.prefix, seed.after, seed.limit)
	}
	var n atomic.Int64
	f.Fuzz(func(t *testing.T, lines, prefix, after string, limit int) {
		kind := "fuzz" + strconv.FormatInt(n.Add(1), 10)
		want := map[string]store.Record{}
		for id := range strings.SplitSeq(lines, "\n") {
			if adapter.CheckKey(kind, id) != nil || len(want) == 20 {
				continue
			}
			if _, ok := want[id]; ok {
				continue
			}
			data := []byte(id + "\x00data")
			if _, err := s.Put(t.Context(), kind, id, data, 0); err != nil {
				t.Fatalf("Put(%q): %v", id, err)
			}
			want[id] = store.Record{Kind: kind, ID: id, Version: 1, Data: data}
		}
		for id, rec := range want {
			got, err := s.Get(t.Context(), kind, id)
			if err != nil {
				t.Fatalf("Get(%q): %v", id, err)
			}
			if got.ID != id || !bytes.Equal(got.Data, rec.Data) {
				t.Fatalf("Get(%q) = id %q data %q", id, got.ID, got.Data)
			}
		}

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
		var exp []store.Record
		for _, id := range ids {
			exp = append(exp, want[id])
		}
		got, err := s.List(t.Context(), kind, prefix, after, limit)
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		if diff := cmp.Diff(exp, got, cmpopts.EquateEmpty(), cmpopts.IgnoreFields(store.Record{}, "UpdatedAt")); diff != "" {
			t.Errorf("List(prefix %q, after %q, limit %d) mismatch (-want +got):\n%s", prefix, after, limit, diff)
		}
	})
}
