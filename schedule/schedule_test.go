package schedule_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/internal/testwait"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/schedule"
	"github.com/calf-go/calf/store"
	storemem "github.com/calf-go/calf/store/memory"
)

// clock is a clock that tests move by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// env is a runtime with a hand-moved clock, an agent "digest" whose
// model call blocks while hold is set, counting its runs by prompt, and
// a scheduler served on it.
type env struct {
	rt    *agent.Runtime
	clk   *clock
	sched *schedule.Scheduler
	runs  atomic.Int64
	hold  chan struct{} // closed: the model answers
}

func newEnv(t *testing.T, b calf.Broker, s store.Store, clk *clock, e *env) *env {
	t.Helper()
	if e == nil {
		e = &env{hold: make(chan struct{})}
		close(e.hold)
	}
	e.clk = clk
	c := calf.NewClient(b, nil)
	t.Cleanup(func() { _ = c.Close() })
	rt := agent.NewRuntime(c, s, &agent.RuntimeOptions{Now: clk.Now, TimerPoll: 10 * time.Millisecond})
	a := agent.Must(agent.New("digest", modeltest.FunctionModel(func(ctx context.Context, _ *model.Request) (*model.Response, error) {
		e.runs.Add(1)
		select {
		case <-e.hold:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return modeltest.Text("the digest"), nil
	}), nil))
	if err := a.Serve(t.Context(), rt, nil); err != nil {
		t.Fatal(err)
	}
	sc := schedule.New(rt, &schedule.Options{Now: clk.Now, Recheck: 20 * time.Millisecond})
	if err := sc.Serve(t.Context()); err != nil {
		t.Fatal(err)
	}
	e.rt, e.sched = rt, sc
	return e
}

func start() *clock { return &clock{t: time.Date(2026, 12, 7, 8, 0, 0, 0, time.UTC)} }

func setup(t *testing.T) *env {
	b := memory.New(nil)
	t.Cleanup(func() { _ = b.Close() })
	return newEnv(t, b, storemem.New(), start(), nil)
}

// firings waits until the schedule has recorded n firings, and returns
// them.
func firings(t *testing.T, e *env, name string, n int) []schedule.Firing {
	t.Helper()
	var h []schedule.Firing
	testwait.For(t, 10*time.Second, "the firings", func() bool {
		sc, err := e.sched.Get(t.Context(), name)
		if err != nil {
			return false
		}
		h = sc.History
		return len(h) >= n
	})
	return h
}

func TestEvery(t *testing.T) {
	e := setup(t)
	ctx := t.Context()
	sc, err := e.sched.Add(ctx, schedule.Spec{Name: "hourly", Kind: "agent", Runner: "digest", Prompt: "summarize", Every: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if want := e.clk.Now().Add(time.Hour); !sc.Next.Equal(want) {
		t.Fatalf("next %s, want %s", sc.Next, want)
	}
	if _, err := e.sched.Add(ctx, schedule.Spec{Name: "hourly", Kind: "agent", Runner: "digest", Every: time.Hour}); !errors.Is(err, schedule.ErrExists) {
		t.Errorf("a second schedule of the name: %v", err)
	}
	for i := 1; i <= 2; i++ {
		e.clk.Add(time.Hour)
		h := firings(t, e, "hourly", i)
		f := h[i-1]
		if f.RunID != schedule.RunID("hourly", start().Now().Add(time.Duration(i)*time.Hour), false) || f.Skipped != "" {
			t.Fatalf("firing %d: %+v", i, f)
		}
		testwait.For(t, 10*time.Second, "the run to end", func() bool {
			v, err := e.rt.LoadRun(ctx, agent.RunRef{Name: "digest", RunID: f.RunID})
			return err == nil && v.RunStatus() == agent.RunComplete
		})
	}
	if n := e.runs.Load(); n != 2 {
		t.Errorf("the agent ran %d times, want 2", n)
	}
	got, _ := e.sched.Get(ctx, "hourly")
	if want := start().Now().Add(3 * time.Hour); !got.Next.Equal(want) {
		t.Errorf("next %s, want %s", got.Next, want)
	}
}

func TestCronTimeZone(t *testing.T) {
	e := setup(t)
	sc, err := e.sched.Add(t.Context(), schedule.Spec{Name: "tokyo9", Kind: "agent", Runner: "digest", Cron: "0 9 * * *", TimeZone: "Asia/Tokyo"})
	if err != nil {
		t.Fatal(err)
	}
	// 09:00 in Tokyo is 00:00 UTC: the next after 08:00 UTC on 7 Dec.
	if want := time.Date(2026, 12, 8, 0, 0, 0, 0, time.UTC); !sc.Next.Equal(want) {
		t.Errorf("next %s, want %s", sc.Next, want)
	}
	for _, bad := range []schedule.Spec{
		{Name: "x", Kind: "agent", Runner: "digest", Cron: "61 * * * *"},
		{Name: "x", Kind: "agent", Runner: "digest", Cron: "0 9 * * *", TimeZone: "Mars/Olympus"},
		{Name: "x", Kind: "agent", Runner: "digest"},
		{Name: "x", Kind: "agent", Runner: "digest", Every: time.Millisecond},
		{Name: "bad name", Kind: "robot", Every: time.Hour},
		{Name: "x", Kind: "workflow", Runner: "w", Prompt: "hi", Every: time.Hour},
	} {
		if _, err := e.sched.Add(t.Context(), bad); !errors.Is(err, schedule.ErrInvalid) {
			t.Errorf("add %+v: %v, want ErrInvalid", bad, err)
		}
	}
}

// After a downtime of five and a half hours, an hourly schedule runs
// nothing (none), the last missed firing (last), or each (all).
func TestCatchUp(t *testing.T) {
	for _, tc := range []struct {
		policy schedule.CatchUp
		runs   int
	}{{schedule.CatchUpNone, 0}, {schedule.CatchUpLast, 1}, {schedule.CatchUpAll, 5}} {
		t.Run(string(tc.policy), func(t *testing.T) {
			b := memory.New(nil)
			t.Cleanup(func() { _ = b.Close() })
			s := storemem.New()
			clk := start()
			// The schedule is added by a process that stops at once.
			c := calf.NewClient(b, nil)
			rt := agent.NewRuntime(c, s, &agent.RuntimeOptions{Now: clk.Now})
			if _, err := schedule.New(rt, &schedule.Options{Now: clk.Now}).Add(t.Context(), schedule.Spec{
				Name: "hourly", Kind: "agent", Runner: "digest", Prompt: "p", Every: time.Hour, CatchUp: tc.policy, Overlap: schedule.OverlapAllow,
			}); err != nil {
				t.Fatal(err)
			}
			_ = c.Close()
			clk.Add(5*time.Hour + 30*time.Minute)
			e := newEnv(t, b, s, clk, nil)
			h := firings(t, e, "hourly", 5)
			var started []string
			for _, f := range h {
				if f.RunID != "" {
					started = append(started, f.RunID)
				} else if f.Skipped != "missed" {
					t.Errorf("firing %+v", f)
				}
			}
			if len(started) != tc.runs {
				t.Errorf("started %d runs, want %d: %+v", len(started), tc.runs, h)
			}
			if tc.policy == schedule.CatchUpLast && started[0] != schedule.RunID("hourly", start().Now().Add(5*time.Hour), false) {
				t.Errorf("ran %s, want the firing at 13:00", started[0])
			}
			testwait.For(t, 10*time.Second, "the runs", func() bool { return e.runs.Load() == int64(tc.runs) })
			sc, _ := e.sched.Get(t.Context(), "hourly")
			if want := start().Now().Add(6 * time.Hour); !sc.Next.Equal(want) {
				t.Errorf("next %s, want %s", sc.Next, want)
			}
		})
	}
}

// A firing while the schedule's last run is in progress is skipped, kept
// for later, or run, by the overlap policy.
func TestOverlap(t *testing.T) {
	for _, policy := range []schedule.Overlap{schedule.OverlapSkip, schedule.OverlapBufferOne, schedule.OverlapAllow} {
		t.Run(string(policy), func(t *testing.T) {
			b := memory.New(nil)
			t.Cleanup(func() { _ = b.Close() })
			e := newEnv(t, b, storemem.New(), start(), &env{hold: make(chan struct{})})
			if _, err := e.sched.Add(t.Context(), schedule.Spec{Name: "m", Kind: "agent", Runner: "digest", Prompt: "p", Every: time.Minute, Overlap: policy}); err != nil {
				t.Fatal(err)
			}
			e.clk.Add(time.Minute)
			firings(t, e, "m", 1)
			testwait.For(t, 10*time.Second, "the first run to call its model", func() bool { return e.runs.Load() == 1 })
			e.clk.Add(time.Minute)
			h := firings(t, e, "m", 2)
			switch policy {
			case schedule.OverlapSkip:
				if h[1].Skipped != "overlap" {
					t.Errorf("second firing %+v, want skipped", h[1])
				}
			case schedule.OverlapBufferOne:
				if h[1].Skipped != "buffered" {
					t.Errorf("second firing %+v, want buffered", h[1])
				}
			case schedule.OverlapAllow:
				if h[1].RunID == "" {
					t.Errorf("second firing %+v, want a run", h[1])
				}
			}
			close(e.hold)
			if policy == schedule.OverlapBufferOne {
				// The buffered firing looks again at the run before it
				// every Recheck, on the scheduler's clock.
				testwait.For(t, 10*time.Second, "the first run to end", func() bool {
					v, err := e.rt.LoadRun(t.Context(), agent.RunRef{Name: "digest", RunID: h[0].RunID})
					return err == nil && v.RunStatus().Terminal()
				})
				e.clk.Add(time.Second)
			}
			want := map[schedule.Overlap]int64{schedule.OverlapSkip: 1, schedule.OverlapBufferOne: 2, schedule.OverlapAllow: 2}[policy]
			testwait.For(t, 10*time.Second, "the runs", func() bool { return e.runs.Load() == want })
			if policy == schedule.OverlapBufferOne {
				h := firings(t, e, "m", 3)
				if h[2].RunID != schedule.RunID("m", start().Now().Add(2*time.Minute), false) {
					t.Errorf("the buffered firing ran as %+v", h[2])
				}
			}
		})
	}
}

// Pause stops the firings, Resume starts them again from the next one,
// Trigger fires at once, Delete removes the schedule.
func TestPauseResumeTriggerDelete(t *testing.T) {
	e := setup(t)
	ctx := t.Context()
	if _, err := e.sched.Add(ctx, schedule.Spec{Name: "h", Kind: "agent", Runner: "digest", Prompt: "p", Every: time.Hour}); err != nil {
		t.Fatal(err)
	}
	sc, err := e.sched.Pause(ctx, "h")
	if err != nil || !sc.Paused || !sc.Next.IsZero() {
		t.Fatalf("pause: %+v, %v", sc, err)
	}
	e.clk.Add(3 * time.Hour)
	id, err := e.sched.Trigger(ctx, "h")
	if err != nil {
		t.Fatal(err)
	}
	h := firings(t, e, "h", 1)
	if len(h) != 1 || h[0].RunID != id || !h[0].Trigger {
		t.Fatalf("history %+v, want the trigger's run %s only", h, id)
	}
	if sc, err = e.sched.Resume(ctx, "h"); err != nil || sc.Paused || !sc.Next.Equal(start().Now().Add(4*time.Hour)) {
		t.Fatalf("resume: %+v, %v", sc, err)
	}
	e.clk.Add(time.Hour)
	h = firings(t, e, "h", 2)
	if h[1].RunID != schedule.RunID("h", start().Now().Add(4*time.Hour), false) {
		t.Errorf("after resume: %+v", h[1])
	}
	list, err := e.sched.List(ctx)
	if err != nil || len(list) != 1 || list[0].Name != "h" {
		t.Errorf("list %+v, %v", list, err)
	}
	if err := e.sched.Delete(ctx, "h"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.sched.Get(ctx, "h"); !errors.Is(err, schedule.ErrNotFound) || !errors.Is(err, store.ErrNotFound) {
		t.Errorf("get after delete: %v", err)
	}
	if _, err := e.sched.Trigger(ctx, "h"); !errors.Is(err, schedule.ErrNotFound) {
		t.Errorf("trigger after delete: %v", err)
	}
	testwait.For(t, 10*time.Second, "both runs", func() bool { return e.runs.Load() == 2 })
}

// Three processes serve the schedules of one store and broker: each
// firing starts one run.
func TestThreeSchedulersFireOnce(t *testing.T) {
	b := memory.New(nil)
	t.Cleanup(func() { _ = b.Close() })
	s := storemem.New()
	clk := start()
	shared := &env{clk: clk, hold: make(chan struct{})}
	close(shared.hold)
	var es []*env
	for range 3 {
		e := newEnv(t, b, s, clk, shared)
		es = append(es, &env{rt: e.rt, sched: e.sched, clk: clk})
	}
	if _, err := es[0].sched.Add(t.Context(), schedule.Spec{Name: "m", Kind: "agent", Runner: "digest", Prompt: "p", Every: time.Minute, Overlap: schedule.OverlapAllow}); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 5; i++ {
		clk.Add(time.Minute)
		firings(t, es[i%3], "m", i)
	}
	testwait.For(t, 10*time.Second, "five runs", func() bool { return shared.runs.Load() >= 5 })
	sc, _ := es[0].sched.Get(t.Context(), "m")
	var ids []string
	for _, f := range sc.History {
		ids = append(ids, f.RunID)
	}
	slices.Sort(ids)
	if len(slices.Compact(ids)) != 5 {
		t.Errorf("history %v, want five distinct runs", ids)
	}
	if n := shared.runs.Load(); n != 5 {
		t.Errorf("the agent ran %d times, want 5", n)
	}
}

// NameOf reads back the schedule of the ids RunID makes, and no other.
func TestNameOf(t *testing.T) {
	at := time.Date(2026, 12, 7, 9, 30, 0, 123e6, time.UTC)
	for _, name := range []string{"a", "morning-digest", "x.y_z-1", "sched-2"} {
		for _, trigger := range []bool{false, true} {
			got, ok := schedule.NameOf(schedule.RunID(name, at, trigger))
			if !ok || got != name {
				t.Errorf("NameOf(RunID(%q, %v)) = %q, %v", name, trigger, got, ok)
			}
		}
	}
	for _, id := range []string{"", "sched-", "run-1", "sched--20261207T093000.123Z", "sched-a-20261207T093000Z", "sched-a b-20261207T093000.123Z", "wake-sched-a-20261207T093000.123Z"} {
		if got, ok := schedule.NameOf(id); ok {
			t.Errorf("NameOf(%q) = %q, true", id, got)
		}
	}
}
