package signals

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/internal/timers"
	"github.com/calf-go/calf/store"
)

// Store kinds of the waits.
const (
	// KindCall records one wait of a run's code (a workflow node, a
	// custom agent's step), under "{run key}/{call}": what it waits for,
	// until when, and once it is over what it got. Code run again finds
	// its earlier waits answered from these records.
	KindCall = "signal_call"
	// KindWaiter names, under "{run key}/{name}", the event that runs the
	// waiting code again when a signal of the name arrives.
	KindWaiter = "signal_waiter"
	// KindCursor holds, under "{run key}/{name}", the last signal of the
	// name that a wait of the run took.
	KindCursor = "signal_cursor"
	// KindWoken indexes, under the signal's id, a signal sent to a run
	// that waited for it by a process whose broker reaches no other
	// process ([Env.Local]): the wake it emitted may reach nobody, so
	// the process that serves the run emits it again ([ReadWoken]).
	KindWoken = "signal_woken"
)

// Env is what a wait needs of the runtime.
type Env struct {
	Store  store.Store
	Client *calf.Client
	Now    func() time.Time
	// StartTimer and StopTimer are the runtime's timers.
	StartTimer func(ctx context.Context, t timers.Timer) (bool, error)
	StopTimer  func(ctx context.Context, id string) (bool, error)
	// Local says that Client's broker reaches no other process (an
	// in-process broker, [calf.IsLocal]): a signal sent to a waiting run
	// is then indexed ([KindWoken]) for the process that serves the run,
	// which may be another one on the same store. A nil Client is local.
	Local bool
}

// Wake is the event that runs the waiting code again: its channel, data
// and key; its id is EventID with ".signal.{seq}" or ".timeout" added,
// or, for a wait that one signal ends for good (Once: a workflow's
// interrupt, an approval request, each answered once), EventID itself
// for a signal, so that the wake and the same event emitted by recovery
// are one event.
type Wake struct {
	Channel  string          `json:"channel"`
	Data     json.RawMessage `json:"data"`
	Key      string          `json:"key,omitempty"`
	EventID  string          `json:"event_id"`
	Metadata calf.Metadata   `json:"metadata,omitzero"`
	Once     bool            `json:"once,omitempty"`
	// Value says that the wake's data is the signal's value, not Data:
	// the signal is the event (an approval request's answer, which its
	// stream shows as it is).
	Value bool `json:"value,omitempty"`
}

// call is a wait as recorded.
type call struct {
	Name  string    `json:"name"`
	Until time.Time `json:"until,omitzero"`
	// Signal, once a signal answered the wait, is its id; TimedOut says
	// that the wait ended at Until with none.
	Signal   string `json:"signal,omitempty"`
	TimedOut bool   `json:"timed_out,omitempty"`
}

// ErrWaiting is matched by the error of [Wait] when the code must stop
// and wait: its wake event runs it again.
var ErrWaiting = errors.New("waiting for a signal")

// Wait is one wait for the signal Name of the run of Key, by the call
// Call of its code (unique within the run, and the same each time the
// code runs again), for at most Timeout (0: no limit).
type Wait struct {
	Key, Call, Name string
	Timeout         time.Duration
	Wake            Wake
}

// Do carries out the wait: it returns the signal that answers it, or
// timedOut when it ended with none, or an error matching [ErrWaiting]
// when the code must stop: the wake event comes when a signal arrives or
// the wait times out, and the code, run again, calls Do again with the
// same call, which then returns the answer. A wait answered before
// returns its answer again.
func (w *Wait) Do(ctx context.Context, env Env) (sig *Signal, timedOut bool, err error) {
	if err := CheckName(w.Name); err != nil {
		return nil, false, err
	}
	id := w.Key + "/" + w.Call
	now := env.Now()
	c := call{Name: w.Name}
	if w.Timeout > 0 {
		c.Until = now.Add(w.Timeout).UTC()
	}
	rec, err := store.CreateOrUpdate(ctx, env.Store, KindCall, id, func(data []byte, exists bool) ([]byte, error) {
		if exists {
			return nil, json.Unmarshal(data, &c)
		}
		return json.Marshal(c)
	})
	if err != nil {
		return nil, false, fmt.Errorf("wait for signal %s: %w", w.Name, err)
	}
	if c.Name != w.Name {
		return nil, false, fmt.Errorf("wait %s was for signal %s when the code first ran, and is for %s now: the code must wait in the same order each time", id, c.Name, w.Name)
	}
	if c.Signal != "" {
		sig, err := Get(ctx, env.Store, c.Signal)
		if err != nil {
			return nil, false, fmt.Errorf("wait for signal %s: %w", w.Name, err)
		}
		return sig, false, advance(ctx, env.Store, w.Key, w.Name, c.Signal)
	}
	if c.TimedOut {
		return nil, true, nil
	}
	sig, ok, err := w.take(ctx, env, rec)
	if err != nil || ok {
		return sig, false, err
	}
	if !c.Until.IsZero() && !now.Before(c.Until) {
		if _, err := w.record(ctx, env, rec, func(c *call) { c.TimedOut = true }); err != nil {
			return nil, false, err
		}
		w.done(ctx, env)
		return nil, true, nil
	}
	// Wait: name the wake event, start the timeout, then look again for
	// a signal sent meanwhile, whose sender found no waiter.
	wdata, err := json.Marshal(w.Wake)
	if err != nil {
		return nil, false, err
	}
	if _, err := store.CreateOrUpdate(ctx, env.Store, KindWaiter, w.Key+"/"+w.Name, func([]byte, bool) ([]byte, error) { return wdata, nil }); err != nil {
		return nil, false, fmt.Errorf("wait for signal %s: %w", w.Name, err)
	}
	if !c.Until.IsZero() {
		if _, err := env.StartTimer(ctx, timers.Timer{
			ID: w.timerID(), Due: c.Until, Channel: w.Wake.Channel, Data: w.Wake.Data, Key: w.Wake.Key,
			Metadata: w.Wake.Metadata, EventID: w.Wake.EventID + ".timeout",
		}); err != nil {
			return nil, false, fmt.Errorf("wait for signal %s: start its timeout: %w", w.Name, err)
		}
	}
	after, err := cursor(ctx, env.Store, w.Key, w.Name)
	if err != nil {
		return nil, false, err
	}
	if next, ok, err := Next(ctx, env.Store, w.Key, w.Name, after); err != nil {
		return nil, false, err
	} else if ok {
		if err := wake(ctx, env.Client, w.Wake, next); err != nil {
			return nil, false, err
		}
	}
	return nil, false, fmt.Errorf("%w %s", ErrWaiting, w.Name)
}

func (w *Wait) timerID() string { return w.Key + "/wait/" + w.Call }

// take takes the next signal of the name, if one was sent, recording it
// as the wait's answer first.
func (w *Wait) take(ctx context.Context, env Env, rec store.Record) (*Signal, bool, error) {
	after, err := cursor(ctx, env.Store, w.Key, w.Name)
	if err != nil {
		return nil, false, err
	}
	sig, ok, err := Next(ctx, env.Store, w.Key, w.Name, after)
	if err != nil || !ok {
		return nil, false, err
	}
	c, err := w.record(ctx, env, rec, func(c *call) { c.Signal = sig.ID })
	if err != nil {
		return nil, false, err
	}
	if c.Signal != sig.ID { // another run of the code took another
		if sig, err = Get(ctx, env.Store, c.Signal); err != nil {
			return nil, false, err
		}
	}
	if err := advance(ctx, env.Store, w.Key, w.Name, sig.ID); err != nil {
		return nil, false, err
	}
	w.done(ctx, env)
	return sig, true, nil
}

// record sets the answer of the wait, unless another run of the code
// did, and returns the wait as it stands.
func (w *Wait) record(ctx context.Context, env Env, rec store.Record, set func(*call)) (call, error) {
	var c call
	_, err := store.UpdateFrom(ctx, env.Store, rec, func(data []byte, exists bool) ([]byte, error) {
		if !exists {
			return nil, fmt.Errorf("wait %s/%s vanished", w.Key, w.Call)
		}
		if err := json.Unmarshal(data, &c); err != nil {
			return nil, err
		}
		if c.Signal != "" || c.TimedOut {
			return nil, nil
		}
		set(&c)
		return json.Marshal(c)
	})
	return c, err
}

// done removes what the wait left waiting: its waiter and its timeout.
// Failures are harmless (a stale waiter wakes code that finds its answer
// recorded; a timer fires into it the same way).
func (w *Wait) done(ctx context.Context, env Env) {
	_ = env.Store.Delete(ctx, KindWaiter, w.Key+"/"+w.Name, 0)
	if w.Timeout > 0 {
		_, _ = env.StopTimer(ctx, w.timerID())
	}
}

func cursor(ctx context.Context, s store.Store, key, name string) (string, error) {
	rec, err := s.Get(ctx, KindCursor, key+"/"+name)
	if errors.Is(err, store.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return string(rec.Data), nil
}

// advance moves the cursor of the name to id, unless it is past it.
func advance(ctx context.Context, s store.Store, key, name, id string) error {
	_, err := store.CreateOrUpdate(ctx, s, KindCursor, key+"/"+name, func(data []byte, exists bool) ([]byte, error) {
		if exists && string(data) >= id {
			return nil, nil
		}
		return []byte(id), nil
	})
	return err
}

// wake emits the wake event for sig.
func wake(ctx context.Context, c *calf.Client, w Wake, sig *Signal) error {
	id := w.EventID
	if !w.Once {
		id += ".signal." + Seq(sig.ID)
	}
	opts := []calf.EmitOption{calf.WithID(id), calf.WithMetadata(w.Metadata)}
	if w.Key != "" {
		opts = append(opts, calf.WithKey(w.Key))
	}
	data := w.Data
	if w.Value {
		data = sig.Value
	}
	_, err := c.Emit(ctx, w.Channel, data, opts...)
	return err
}

// Deliver sends the signal name with value to the run of key, and wakes
// the code that waits for it, if any; it returns the signal.
func Deliver(ctx context.Context, env Env, key, name string, value json.RawMessage) (*Signal, error) {
	sig, err := Send(ctx, env.Store, key, name, value, env.Now())
	if err != nil {
		return nil, err
	}
	_, err = wakeWaiter(ctx, env, key, name, sig)
	return sig, err
}

// wakeWaiter wakes the waiter of the signal name of the run of key, if
// one is registered, with sig, and reports whether one was. On a broker
// that reaches no other process, the signal is indexed for the process
// that serves the run ([KindWoken]).
func wakeWaiter(ctx context.Context, env Env, key, name string, sig *Signal) (bool, error) {
	rec, err := env.Store.Get(ctx, KindWaiter, key+"/"+name)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil // kept until a wait takes it
	}
	if err != nil {
		return false, err
	}
	var w Wake
	if err := json.Unmarshal(rec.Data, &w); err != nil {
		return false, fmt.Errorf("signals: waiter %s: %w", rec.ID, err)
	}
	if env.Local || env.Client == nil {
		if _, err := env.Store.Put(ctx, KindWoken, sig.ID, []byte("{}"), 0); err != nil && !errors.Is(err, store.ErrConflict) {
			return true, err
		}
	}
	if env.Client == nil {
		return true, nil
	}
	return true, wake(ctx, env.Client, w, sig)
}
