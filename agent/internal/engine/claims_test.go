package engine

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	storemem "github.com/calf-go/calf/store/memory"
)

// A claim renewed by its holder keeps a delivery in another process
// waiting, past the time a claim may go unrenewed, until the outcome is
// recorded; one whose holder stopped renewing it (died) is taken over.
func TestClaimWaitsForLiveHolder(t *testing.T) {
	st := storemem.New()
	a := &Claims{store: st, holder: "a", now: time.Now}
	b := &Claims{store: st, holder: "b", now: time.Now}
	ctx := t.Context()
	never := func(context.Context) (bool, error) { return false, nil }
	ha, finished, err := a.Take(ctx, "r/tool/c1", never)
	if err != nil || finished || ha == nil {
		t.Fatalf("a.take = %v, %v, %v", ha, finished, err)
	}
	var recorded atomic.Bool
	got := make(chan bool, 1)
	go func() {
		hb, finished, err := b.Take(ctx, "r/tool/c1", func(context.Context) (bool, error) { return recorded.Load(), nil })
		if err != nil || hb != nil {
			t.Errorf("b.take = %v, %v, %v", hb, finished, err)
		}
		got <- finished
	}()
	select {
	case <-got:
		t.Fatal("b went on while a held the claim")
	case <-time.After(claimTTL + 2*claimRenew):
	}
	recorded.Store(true)
	if !<-got {
		t.Error("b did not see the outcome recorded")
	}
	ha.Release(ctx)

	// A holder that dies: its claim is no longer renewed.
	hc, _, err := a.Take(ctx, "r/tool/c2", never)
	if err != nil {
		t.Fatal(err)
	}
	close(hc.stop)
	<-hc.done
	start := time.Now()
	hb, finished, err := b.Take(ctx, "r/tool/c2", never)
	if err != nil || finished || hb == nil {
		t.Fatalf("b.take = %v, %v, %v", hb, finished, err)
	}
	if waited := time.Since(start); waited < claimTTL {
		t.Errorf("taken over after %s, before the claim could lapse (%s)", waited, claimTTL)
	}
	hb.Release(ctx)

	// A holder that stops releases its claim: another takes it at once.
	hd, _, err := a.Take(ctx, "r/tool/c3", never)
	if err != nil {
		t.Fatal(err)
	}
	stopped, cancel := context.WithCancel(ctx)
	cancel()
	hd.Release(stopped)
	start = time.Now()
	if hb, _, err := b.Take(ctx, "r/tool/c3", never); err != nil || hb == nil {
		t.Fatalf("b.take = %v, %v", hb, err)
	} else {
		hb.Release(ctx)
	}
	if waited := time.Since(start); waited >= claimTTL {
		t.Errorf("a released claim was taken after %s", waited)
	}
}
