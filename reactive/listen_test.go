package reactive_test

import (
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/reactive"
	storemem "github.com/calf-go/calf/store/memory"
)

// A store opened by two processes (two clients on one broker and one state
// store): a change dispatched in one reaches the other's subscribers,
// once, with the state it says; the dispatcher's own subscribers hear it
// once too.
func TestListenAcrossProcesses(t *testing.T) {
	b := memory.New(nil)
	defer b.Close()
	st := storemem.New()
	open := func() *reactive.Store[counter] {
		c := calf.NewClient(b, nil)
		t.Cleanup(func() { _ = c.Close() })
		s, err := reactive.NewStore("shared", counter{}, counterActions(), &reactive.Options{State: st, Client: c})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Listen(t.Context()); err != nil {
			t.Fatal(err)
		}
		return s
	}
	a, bStore := open(), open()
	heard := make(chan int64, 10)
	bStore.Subscribe("n", func(d *reactive.Delta) {
		if bStore.Get().N < int(d.Version) {
			t.Errorf("the listener's state %d at delta %d", bStore.Get().N, d.Version)
		}
		heard <- d.Version
	})
	own := 0
	a.Subscribe("", func(*reactive.Delta) { own++ })
	for range 3 {
		mustDispatch(t, a, "inc", nil)
	}
	var got []int64
	for len(got) < 3 {
		select {
		case v := <-heard:
			got = append(got, v)
		case <-time.After(10 * time.Second):
			t.Fatalf("heard %v", got)
		}
	}
	// Once the broker has handled every message, a delta heard twice
	// would have come.
	if err := b.Drain(t.Context()); err != nil {
		t.Fatal(err)
	}
	select {
	case v := <-heard:
		t.Errorf("a delta heard twice: %d", v)
	default:
	}
	if own != 3 {
		t.Errorf("the dispatcher's subscriber heard %d deltas, want 3", own)
	}
	if err := (&reactive.Store[counter]{}).Listen(t.Context()); err == nil {
		t.Error("Listen without a client: no error")
	}
}
