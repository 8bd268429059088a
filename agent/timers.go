package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/internal/signals"
	"github.com/calf-go/calf/internal/timers"
)

// signalWatchEvery is how often a runtime on an in-process broker reads
// the signals that other processes sent to its waiting runs.
const signalWatchEvery = time.Second

// Timer is a durable timer: at Due, an event is emitted on Channel, by
// whichever process that shares the runtime's store fires timers (see
// [Runtime.ServeTimers]). It is kept as records in the store, not as a
// goroutine or a message in flight, so that it survives restarts and
// costs a waiting process nothing. Workflows' sleeps, runs' deadlines and
// schedules are timers; a program may start its own.
type Timer struct {
	// ID names the timer. Starting a timer of an id that exists changes
	// nothing, so that a handler that may run twice (its message
	// redelivered) starts it once. At most 490 bytes.
	ID string
	// Due is when the event is emitted.
	Due time.Time
	// Channel, Data (JSON), Key and Metadata are the event's.
	Channel  string
	Data     json.RawMessage
	Key      string
	Metadata calf.Metadata
	// EventID is the id of the event: the same at each firing, so that a
	// timer fired again (its first firer died before recording that it
	// fired) is the same event, which a handler that records what it did
	// handles once. Default: ID.
	EventID string
	// Created is when the timer was started.
	Created time.Time
}

// ErrInvalidTimer is matched by the error of [Runtime.StartTimer] for a
// timer with no id (or one too long), no channel or no due time.
var ErrInvalidTimer = timers.ErrInvalid

// timerService is the runtime's timers, made on first use.
type timerService struct {
	once  sync.Once
	svc   *timers.Service
	serve sync.Once
}

func (rt *Runtime) timerSvc() *timers.Service {
	rt.timers.once.Do(func() {
		rt.timers.svc = timers.New(rt.store, rt.client, timers.Options{Now: rt.now, Poll: rt.timerPoll, Logger: rt.log})
	})
	return rt.timers.svc
}

// StartTimer keeps t in the store until it is due, and reports whether it
// is new: a timer of t.ID that exists is left as it is.
func (rt *Runtime) StartTimer(ctx context.Context, t Timer) (bool, error) {
	if rt == nil {
		return false, ErrNoRuntime
	}
	return rt.timerSvc().Start(ctx, timers.Timer(t))
}

// StopTimer removes the timer id before it fires, and reports whether
// there was one (a timer that is firing at that moment may still fire).
func (rt *Runtime) StopTimer(ctx context.Context, id string) (bool, error) {
	if rt == nil {
		return false, ErrNoRuntime
	}
	return rt.timerSvc().Stop(ctx, id)
}

// Timers returns the timers kept whose ids start with prefix, by id.
func (rt *Runtime) Timers(ctx context.Context, prefix string) ([]Timer, error) {
	if rt == nil {
		return nil, ErrNoRuntime
	}
	ts, err := rt.timerSvc().List(ctx, prefix, "", 0)
	if err != nil {
		return nil, fmt.Errorf("agent: timers: %w", err)
	}
	out := make([]Timer, len(ts))
	for i, t := range ts {
		out[i] = Timer(t)
	}
	return out, nil
}

// ServeTimers has this process fire the timers of the runtime's store as
// they fall due, until the runtime's client shuts down; calling it again
// does nothing. Serving an agent, a team or a workflow, and [Worker.Run],
// call it: every process that serves runs fires timers, and of several,
// one fires each timer. A timer started in this process fires when due;
// one started elsewhere within [RuntimeOptions.TimerPoll]; one whose
// firer died within a few seconds more.
//
// On an in-process broker it also carries out the signals (approval
// answers among them) that other processes send to its waiting runs,
// which they can only record in the store (read every second).
func (rt *Runtime) ServeTimers() {
	if rt == nil {
		return
	}
	rt.timers.serve.Do(func() {
		ctx, cancel := context.WithCancel(context.Background())
		var loops sync.WaitGroup
		loops.Go(func() { _ = rt.timerSvc().Run(ctx) })
		// The runs' deadlines are timers too: this process cancels those
		// whose deadline passed.
		rt.serveDeadlines(ctx)
		// And so are the expiries of approval requests.
		rt.serveApprovalExpiry(ctx)
		// On a broker that reaches no other process, the signals that
		// other processes send to the runs of this one are found in the
		// store (see signals.Watch).
		if rt.inProcessBroker() {
			loops.Go(func() { signals.Watch(ctx, rt.signalEnv(), signalWatchEvery, rt.log) })
		}
		rt.client.OnShutdown(func() {
			cancel()
			loops.Wait()
		})
	})
}
