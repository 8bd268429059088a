package storetest

import (
	"strconv"
	"testing"

	"github.com/calf-go/calf/store"
)

// benchData is the size of the record the benchmarks write: about what a
// small run state holds.
const benchData = 1 << 10

// PutBenchmark measures a compare-and-swap write of 1 KiB to one existing
// record, the write every agent step makes. Adapters call it from their
// own BenchmarkPut.
func PutBenchmark(b *testing.B, s store.Store) {
	kind := newKind("benchput")
	data := make([]byte, benchData)
	v, err := s.Put(b.Context(), kind, "r", data, 0)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(benchData)
	for b.Loop() {
		if v, err = s.Put(b.Context(), kind, "r", data, v); err != nil {
			b.Fatal(err)
		}
	}
}

// GetBenchmark measures reading a 1 KiB record. Adapters call it from
// their own BenchmarkGet.
func GetBenchmark(b *testing.B, s store.Store) {
	kind := newKind("benchget")
	if _, err := s.Put(b.Context(), kind, "r", make([]byte, benchData), 0); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(benchData)
	for b.Loop() {
		if _, err := s.Get(b.Context(), kind, "r"); err != nil {
			b.Fatal(err)
		}
	}
}

// UpdateBenchmark measures [store.Update] incrementing a counter: a read
// and a compare-and-swap write. Adapters call it from their own
// BenchmarkUpdate.
func UpdateBenchmark(b *testing.B, s store.Store) {
	kind := newKind("benchupdate")
	incr := func(data []byte, exists bool) ([]byte, error) {
		n := 0
		if exists {
			var err error
			if n, err = strconv.Atoi(string(data)); err != nil {
				return nil, err
			}
		}
		return strconv.AppendInt(nil, int64(n+1), 10), nil
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := store.Update(b.Context(), s, kind, "counter", incr); err != nil {
			b.Fatal(err)
		}
	}
}
