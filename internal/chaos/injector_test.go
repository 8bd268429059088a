package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"
)

// span is a range of durations, drawn from uniformly.
type span struct{ min, max time.Duration }

// parseSpan reads MIN-MAX (two Go durations) or a single duration.
func parseSpan(s string) (span, error) {
	lo, hi, ok := strings.Cut(s, "-")
	if !ok {
		hi = lo
	}
	a, err := time.ParseDuration(strings.TrimSpace(lo))
	if err != nil {
		return span{}, err
	}
	b, err := time.ParseDuration(strings.TrimSpace(hi))
	if err != nil {
		return span{}, err
	}
	if a <= 0 || b < a {
		return span{}, fmt.Errorf("%q: want 0 < MIN <= MAX", s)
	}
	return span{a, b}, nil
}

func (s span) String() string { return s.min.String() + "-" + s.max.String() }

// draw returns a duration of s.
func (s span) draw(rng *rand.Rand) time.Duration {
	if s.max == s.min {
		return s.min
	}
	return s.min + time.Duration(rng.Int64N(int64(s.max-s.min)))
}

// outage is one fault the injector caused.
type outage struct {
	Target string
	Action string
	// Planned is how long the target was to stay down.
	Planned time.Duration
	// Start is when the action was taken; End when the target answered
	// again (for a worker kill, when it was killed: its replacement starts
	// at once).
	Start, End time.Time
	// PID is the killed worker's process, in the worker-kill mode.
	PID int
	Err string
}

// injector takes one of its targets down at random intervals.
type injector struct {
	rng     *rand.Rand
	targets []*service
	actions []string
	gap     span // between the end of an outage and the start of the next
	length  span // of an outage
	// killWorker, in the worker-kill mode, replaces the services: it kills
	// a worker with SIGKILL, starts its replacement, and returns the
	// killed process's id.
	killWorker func() (int, error)
	logf       func(format string, args ...any)

	mu      sync.Mutex
	outages []outage
}

func newInjector(seed uint64) *injector {
	return &injector{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

// run injects outages until ctx ends or until, whichever comes first; an
// outage in progress when ctx ends still ends as planned.
func (in *injector) run(ctx context.Context, until time.Time) {
	for {
		// Every outage ends inside the window, so that runs follow it.
		gap, length := in.gap.draw(in.rng), in.length.draw(in.rng)
		if time.Now().Add(gap + length).After(until) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(gap):
		}
		o := in.inject(ctx, length)
		in.mu.Lock()
		in.outages = append(in.outages, o)
		in.mu.Unlock()
		if o.Err != "" {
			in.logf("outage %d: %s %s for %s: %s", len(in.outages), o.Action, o.Target, o.Planned, o.Err)
		} else {
			in.logf("outage %d: %s %s at %s for %s: back after %s",
				len(in.outages), o.Action, o.Target, o.Start.Format("15:04:05.000"), o.Planned, o.End.Sub(o.Start).Round(time.Millisecond))
		}
	}
}

// inject causes one outage and waits for its end.
func (in *injector) inject(ctx context.Context, length time.Duration) outage {
	if in.killWorker != nil {
		o := outage{Target: "worker", Action: "kill", Start: time.Now()}
		pid, err := in.killWorker()
		o.End, o.PID = time.Now(), pid
		if err != nil {
			o.Err = err.Error()
		}
		return o
	}
	s := in.targets[in.rng.IntN(len(in.targets))]
	o := outage{Target: s.name, Action: in.actions[in.rng.IntN(len(in.actions))], Planned: length}
	o.Start = time.Now()
	var err error
	switch o.Action {
	case "pause":
		if err = s.pause(); err == nil {
			sleep(ctx, o.Planned)
			if err = s.resume(); err == nil {
				err = s.waitReady(context.WithoutCancel(ctx))
			}
		}
	default:
		if err = s.down(o.Action); err == nil {
			sleep(ctx, o.Planned-time.Since(o.Start))
			err = s.start(context.WithoutCancel(ctx))
		}
	}
	o.End = time.Now()
	if err != nil {
		o.Err = err.Error()
	}
	return o
}

// all returns the outages so far.
func (in *injector) all() []outage {
	in.mu.Lock()
	defer in.mu.Unlock()
	return append([]outage(nil), in.outages...)
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
