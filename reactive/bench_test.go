package reactive_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"

	"github.com/calf-go/calf/reactive"
)

// bigState has 10,000 fields besides the one the benchmark changes.
type bigState struct {
	Fields map[string]int `json:"fields"`
	Hits   int            `json:"hits"`
}

func newBig() bigState {
	s := bigState{Fields: make(map[string]int, 10000)}
	for i := range 10000 {
		s.Fields["f"+strconv.Itoa(i)] = i
	}
	return s
}

func hit(s bigState, _ struct{}) (bigState, []string, error) {
	s.Hits++
	return s, []string{"hits"}, nil
}

// BenchmarkDispatch measures a dispatch on a state of 10,000 fields with
// 0, 1 and 100 subscribers (each matching the change), next to the floor:
// the action function called alone.
func BenchmarkDispatch(b *testing.B) {
	b.Run("floor", func(b *testing.B) {
		s := newBig()
		b.ReportAllocs()
		for b.Loop() {
			s, _, _ = hit(s, struct{}{})
		}
	})
	// What a deep copy of the state per change would cost (the JSON round
	// trip of the state), for comparison: the store takes no copy.
	b.Run("deepcopy", func(b *testing.B) {
		s := newBig()
		b.ReportAllocs()
		for b.Loop() {
			raw, _ := json.Marshal(s)
			var cp bigState
			_ = json.Unmarshal(raw, &cp)
			s, _, _ = hit(cp, struct{}{})
		}
	})
	for _, subs := range []int{0, 1, 100} {
		b.Run("subscribers="+strconv.Itoa(subs), func(b *testing.B) {
			a := &reactive.Actions[bigState]{}
			reactive.MustAction(a, "hit", hit)
			st, err := reactive.NewStore("big", newBig(), a, &reactive.Options{History: -1})
			if err != nil {
				b.Fatal(err)
			}
			n := 0
			for i := range subs {
				pattern := "hits"
				if i%2 == 1 {
					pattern = ""
				}
				st.Subscribe(pattern, func(*reactive.Delta) { n++ })
			}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := st.Dispatch(ctx, "hit", nil); err != nil {
					b.Fatal(err)
				}
			}
			if n != subs*b.N {
				b.Fatalf("%d notifications for %d dispatches and %d subscribers", n, b.N, subs)
			}
		})
	}
}
