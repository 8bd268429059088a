package memory

import (
	"context"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/calf-go/calf/store"
)

// List sees exactly the live records in order, whatever mix of creates,
// deletes and re-creates came before it.
func TestListAfterRandomWrites(t *testing.T) {
	ctx := context.Background()
	s := New()
	live := map[string]int64{}
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		for range r.IntN(20) {
			id := "k" + strconv.Itoa(r.IntN(50))
			if v, ok := live[id]; ok && r.IntN(2) == 0 {
				if err := s.Delete(ctx, store.KindRun, id, v); err != nil {
					t.Fatal(err)
				}
				delete(live, id)
				continue
			}
			v, err := s.Put(ctx, store.KindRun, id, []byte(`{}`), live[id])
			if err != nil {
				t.Fatal(err)
			}
			live[id] = v
		}
		recs, err := s.List(ctx, store.KindRun, "", "", 0)
		if err != nil {
			t.Fatal(err)
		}
		var got, want []string
		for _, rec := range recs {
			got = append(got, rec.ID)
		}
		for id := range live {
			want = append(want, id)
		}
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("round %d: List = %v, want %v", round, got, want)
		}
	}
}
