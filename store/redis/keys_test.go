package redis

import (
	"testing"
)

// FuzzRecordKey checks that two records share a key only when they have
// the same kind and id, and that no record key is a kind's index key.
func FuzzRecordKey(f *testing.F) {
	for _, seed := range [][4]string{
		{"a", "b:c", "a:b", "c"}, {"1:a", "b", "1", "a:b"}, {"k", ":", "k:", ""},
		{"3:r", "x", "3", "r:x"}, {"run", "1", "run", "1"},
	} {
		f.Add(seed[0], seed[1], seed[2], seed[3])
	}
	s := New(nil, nil)
	f.Fuzz(func(t *testing.T, kind1, id1, kind2, id2 string) {
		same := s.recordKey(kind1, id1) == s.recordKey(kind2, id2)
		if same != (kind1 == kind2 && id1 == id2) {
			t.Errorf("records %q/%q and %q/%q: same key = %v", kind1, id1, kind2, id2, same)
		}
		if s.recordKey(kind1, id1) == s.indexKey(kind2) {
			t.Errorf("record %q/%q has the index key of kind %q", kind1, id1, kind2)
		}
		if (s.indexKey(kind1) == s.indexKey(kind2)) != (kind1 == kind2) {
			t.Errorf("kinds %q and %q: same index key = %v", kind1, kind2, kind1 != kind2)
		}
	})
}
