package engine

import (
	"slices"
	"testing"
)

// The orders work on any event type: here, events that are their own
// description.
func self(o Ordered) Ordered { return o }

// A chain's order holds the events of a run handed off to until the end
// that hands off to it, and each run's events in their causal order.
func TestChainOrderOfAHandoff(t *testing.T) {
	c := NewChainOrder("r1", self)
	in := []Ordered{
		{Kind: OrderInference, Run: "r2", Step: 1},
		{Kind: OrderInference, Run: "r1", Step: 1},
		{Kind: OrderAfterCall, Run: "r1", Step: 1, Call: "c1"},
		{Kind: OrderCall, Run: "r1", Step: 1, Call: "c1", Deltas: 1},
		{Kind: OrderEnd, Run: "r1", Step: 1, Deltas: 1, HandsOffTo: "r2"},
		{Kind: OrderDelta, Run: "r1", Step: 1},
		{Kind: OrderEnd, Run: "r2", Step: 1},
	}
	var got []Ordered
	for _, ev := range in {
		got = append(got, c.Add(ev)...)
	}
	want := []Ordered{in[1], in[5], in[3], in[2], in[4], in[0], in[6]}
	if !slices.Equal(got, want) {
		t.Errorf("order:\n got %v\nwant %v", got, want)
	}
	if c.Ended() {
		t.Error("ended with nothing held")
	}
}

// An end held for a call that never comes is reported, and a flush
// yields it after the early calls.
func TestStreamOrderFlush(t *testing.T) {
	o := NewStreamOrder(self)
	in := []Ordered{
		{Kind: OrderInference, Run: "r", Step: 1},
		{Kind: OrderAfterCall, Run: "r", Step: 1, Call: "lost"},
		{Kind: OrderCall, Run: "r", Step: 2, Call: "early"},
		{Kind: OrderEnd, Run: "r", Step: 2},
	}
	var got []Ordered
	for _, ev := range in {
		got = append(got, o.Add(ev)...)
	}
	if !o.Ended() {
		t.Fatal("not ended with the end held")
	}
	got = append(got, o.Flush()...)
	if want := []Ordered{in[0], in[2], in[1], in[3]}; !slices.Equal(got, want) {
		t.Errorf("order:\n got %v\nwant %v", got, want)
	}
}
