package memory_test

import (
	"testing"

	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/store/memory"
	"github.com/calf-go/calf/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s := memory.New()
		t.Cleanup(func() { s.Close() })
		return s
	})
}

func newBench(b *testing.B) *memory.Store {
	s := memory.New()
	b.Cleanup(func() { s.Close() })
	return s
}

func BenchmarkPut(b *testing.B)    { storetest.PutBenchmark(b, newBench(b)) }
func BenchmarkGet(b *testing.B)    { storetest.GetBenchmark(b, newBench(b)) }
func BenchmarkUpdate(b *testing.B) { storetest.UpdateBenchmark(b, newBench(b)) }
