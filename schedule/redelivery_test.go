package schedule_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/internal/testwait"
	"github.com/calf-go/calf/schedule"
	"github.com/calf-go/calf/store"
	storemem "github.com/calf-go/calf/store/memory"
)

// failRecord fails the first write of a schedule's record that moves
// its next firing past after (the record of a firing, after its runs
// started), and moves the clock on as it fails: the firing is carried
// out again later, as after a process killed midway whose message comes
// back once the next firings are due.
type failRecord struct {
	store.Store
	clk   *clock
	by    time.Duration
	after time.Time
	armed atomic.Bool
	// onFail, when set, runs as the write fails.
	onFail func()
}

func (f *failRecord) Put(ctx context.Context, kind, id string, data []byte, version int64) (int64, error) {
	var sc schedule.Schedule
	if kind == schedule.Kind && version != 0 && json.Unmarshal(data, &sc) == nil && sc.Next.After(f.after) && f.armed.CompareAndSwap(true, false) {
		f.clk.Add(f.by)
		if f.onFail != nil {
			f.onFail()
		}
		return 0, errors.New("store unreachable")
	}
	return f.Store.Put(ctx, kind, id, data, version)
}

// A firing carried out again after its next firings fell due (its
// first carrying-out started its run, then failed before it recorded
// it) starts no other run: the run it started is the firing's, recorded
// as such, and the overlap policy sees it.
func TestFiringCarriedOutAgainLater(t *testing.T) {
	b := memory.New(nil)
	t.Cleanup(func() { _ = b.Close() })
	clk := start()
	fs := &failRecord{Store: storemem.New(), clk: clk, by: 2 * time.Minute}
	e := newEnv(t, b, fs, clk, &env{hold: make(chan struct{})})
	ctx := t.Context()
	if _, err := e.sched.Add(ctx, schedule.Spec{Name: "m", Kind: "agent", Runner: "digest", Prompt: "p", Every: time.Minute}); err != nil {
		t.Fatal(err)
	}
	first := start().Now().Add(time.Minute)
	fs.after = first
	fs.armed.Store(true)
	clk.Add(time.Minute)
	testwait.For(t, 10*time.Second, "the firings through the third", func() bool {
		sc, err := e.sched.Get(ctx, "m")
		return err == nil && sc.Next.After(first.Add(2*time.Minute))
	})
	testwait.For(t, 10*time.Second, "the first run to call its model", func() bool { return e.runs.Load() >= 1 })
	if testwait.Until(t, 300*time.Millisecond, func() bool { return e.runs.Load() > 1 }) {
		t.Errorf("%d runs in progress at once; the overlap policy is skip", e.runs.Load())
	}
	sc, err := e.sched.Get(ctx, "m")
	if err != nil {
		t.Fatal(err)
	}
	want := schedule.RunID("m", first, false)
	if _, err := e.rt.LoadRun(ctx, agent.RunRef{Name: "digest", RunID: want}); err != nil {
		t.Fatalf("the run of the first firing: %v", err)
	}
	var got *schedule.Firing
	for i, f := range sc.History {
		if f.At.Equal(first) {
			got = &sc.History[i]
		}
	}
	if got == nil || got.RunID != want {
		t.Errorf("history %+v: want the firing at %s recorded with its run %s", sc.History, first.Format(time.RFC3339), want)
	}
	close(e.hold)
}

// A firing that started its run, then failed before it recorded it, and
// is carried out again once the schedule is paused records its run.
func TestFiringCarriedOutAgainAfterPause(t *testing.T) {
	b := memory.New(nil)
	t.Cleanup(func() { _ = b.Close() })
	clk := start()
	fs := &failRecord{Store: storemem.New(), clk: clk}
	e := newEnv(t, b, fs, clk, nil)
	ctx := t.Context()
	if _, err := e.sched.Add(ctx, schedule.Spec{Name: "m", Kind: "agent", Runner: "digest", Prompt: "p", Every: time.Minute}); err != nil {
		t.Fatal(err)
	}
	first := start().Now().Add(time.Minute)
	fs.after = first
	fs.onFail = func() {
		if _, err := e.sched.Pause(context.Background(), "m"); err != nil {
			t.Error(err)
		}
	}
	fs.armed.Store(true)
	clk.Add(time.Minute)
	want := schedule.RunID("m", first, false)
	testwait.For(t, 10*time.Second, "the run of the first firing to end", func() bool {
		v, err := e.rt.LoadRun(ctx, agent.RunRef{Name: "digest", RunID: want})
		return err == nil && v.RunStatus().Terminal()
	})
	ok := testwait.Until(t, 2*time.Second, func() bool {
		sc, err := e.sched.Get(ctx, "m")
		return err == nil && len(sc.History) == 1 && sc.History[0].RunID == want
	})
	if sc, err := e.sched.Get(ctx, "m"); !ok || !sc.Paused || sc.Pending != nil {
		t.Errorf("schedule %+v (%v): want it paused, its history the run %s of the first firing, nothing pending", sc, err, want)
	}
}
