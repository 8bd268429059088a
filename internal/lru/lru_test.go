package lru

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// keys returns the cache's keys, the most recently used first.
func keys[K comparable, V any](c *Cache[K, V]) []K {
	var ks []K
	for e := c.root.next; e != &c.root; e = e.next {
		ks = append(ks, e.key)
	}
	return ks
}

func TestEvictsLeastRecentlyUsed(t *testing.T) {
	c := New[string, int](3, 0)
	c.Add("a", 1)
	c.Add("b", 2)
	c.Add("c", 3)
	if v, ok := c.Get("a"); !ok || v != 1 {
		t.Fatalf("Get(a) = %d, %v", v, ok)
	}
	c.Add("d", 4) // b is the least recently used
	if _, ok := c.Peek("b"); ok {
		t.Error("b is still cached: the least recently used entry was not the one evicted")
	}
	if got, want := keys(c), []string{"d", "a", "c"}; !slices.Equal(got, want) {
		t.Errorf("keys = %v, want %v", got, want)
	}
	// Peek is not a use: c stays the least recently used.
	c.Peek("c")
	c.Add("e", 5)
	if _, ok := c.Peek("c"); ok {
		t.Error("c is still cached after Peek and one more Add")
	}
	// Adding a key again replaces its value and makes it the most recent.
	c.Add("a", 10)
	if v, _ := c.Peek("a"); v != 10 || c.Len() != 3 {
		t.Errorf("a = %d, len %d; want 10, 3", v, c.Len())
	}
	if got, want := keys(c), []string{"a", "e", "d"}; !slices.Equal(got, want) {
		t.Errorf("keys = %v, want %v", got, want)
	}
	if v, ok := c.Remove("e"); !ok || v != 5 {
		t.Errorf("Remove(e) = %d, %v", v, ok)
	}
	if _, ok := c.Remove("e"); ok {
		t.Error("Remove of a removed key found it")
	}
	if _, ok := c.Get("zz"); ok {
		t.Error("Get of a key never added found it")
	}
}

func TestCostBound(t *testing.T) {
	c := New[int, string](100, 10)
	c.AddCost(1, "a", 4)
	c.AddCost(2, "b", 4)
	c.Get(1)
	c.AddCost(3, "c", 4) // 12 > 10: 2 goes
	if got, want := keys(c), []int{3, 1}; !slices.Equal(got, want) {
		t.Errorf("keys = %v, want %v", got, want)
	}
	if c.Cost() != 8 {
		t.Errorf("cost = %d, want 8", c.Cost())
	}
	// A value above the bound on its own is not kept, and takes its key's
	// old value with it; nothing else goes.
	if c.AddCost(1, "big", 11) {
		t.Error("a value costing more than the bound was kept")
	}
	if _, ok := c.Peek(1); ok {
		t.Error("the key of a value too large kept its old value")
	}
	if got, want := keys(c), []int{3}; !slices.Equal(got, want) || c.Cost() != 4 {
		t.Errorf("keys = %v cost %d, want %v cost 4", got, c.Cost(), want)
	}
	// One entry costing the whole bound evicts every other.
	c.AddCost(4, "d", 10)
	if got, want := keys(c), []int{4}; !slices.Equal(got, want) || c.Cost() != 10 {
		t.Errorf("keys = %v cost %d, want %v cost 10", got, c.Cost(), want)
	}
}

// TestAgainstModel runs random operations on a cache and on a plain
// slice kept in order of use, and compares them after each.
func TestAgainstModel(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const maxLen, maxCost = 8, 40
	c := New[int, int](maxLen, maxCost)
	type item struct{ k, v, cost int }
	var model []item // most recent first
	find := func(k int) int {
		return slices.IndexFunc(model, func(it item) bool { return it.k == k })
	}
	for i := range 20000 {
		k := r.IntN(16)
		switch op := r.IntN(4); op {
		case 0: // Get
			v, ok := c.Get(k)
			j := find(k)
			if ok != (j >= 0) || (ok && v != model[j].v) {
				t.Fatalf("op %d: Get(%d) = %d, %v; model %v", i, k, v, ok, model)
			}
			if j >= 0 {
				it := model[j]
				model = append([]item{it}, slices.Delete(model, j, j+1)...)
			}
		case 1: // Remove
			_, ok := c.Remove(k)
			j := find(k)
			if ok != (j >= 0) {
				t.Fatalf("op %d: Remove(%d) = %v", i, k, ok)
			}
			if j >= 0 {
				model = slices.Delete(model, j, j+1)
			}
		default: // AddCost
			cost := r.IntN(maxCost + 5)
			c.AddCost(k, i, cost)
			if j := find(k); j >= 0 {
				model = slices.Delete(model, j, j+1)
			}
			if cost <= maxCost {
				total := cost
				for _, it := range model {
					total += it.cost
				}
				for len(model) >= maxLen || total > maxCost {
					total -= model[len(model)-1].cost
					model = model[:len(model)-1]
				}
				model = append([]item{{k, i, cost}}, model...)
			}
		}
		got := keys(c)
		want := make([]int, len(model))
		cost := 0
		for j, it := range model {
			want[j] = it.k
			cost += it.cost
		}
		if !slices.Equal(got, want) || c.Len() != len(want) || c.Cost() != cost {
			t.Fatalf("op %d: keys %v (len %d, cost %d), model %v (cost %d)", i, got, c.Len(), c.Cost(), want, cost)
		}
	}
}

func BenchmarkAddGet(b *testing.B) {
	c := New[int, int](1024, 0)
	for i := 0; b.Loop(); i++ {
		c.Add(i%2048, i)
		c.Get((i + 7) % 2048)
	}
}
