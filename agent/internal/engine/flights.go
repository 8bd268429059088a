package engine

import (
	"context"
	"errors"
	"sync"

	"github.com/calf-go/calf"
)

// Flights makes a costly call (a tool's execution, a model call) happen
// once in the process for one key (a run's tool call, a run's step),
// however many deliveries of its message are in hand at once, and keeps
// what the call obtained until it is recorded in the store.
//
// A delivery enters its key's flight before it looks at anything: one
// delivery of a key acts at a time, the others wait for their turn (a
// message still being retried through an outage may be delivered again
// beside itself, after its partition's lease was lost and taken again). A
// delivery that obtains an outcome keeps it in the flight before it
// records it, and drops it once it is recorded, or once the run no longer
// needs it; a delivery that follows finds it there and records it rather
// than call again. Nothing kept is evicted: memory is bounded by refusing
// new calls, not by dropping outcomes. Past limit outcomes waiting to be
// recorded, Admit refuses a new call with an outage error, which the
// broker retries without using up an attempt; the outcomes already kept
// are recorded meanwhile. The bound is thus limit plus the calls in
// progress, which the handlers' concurrency bounds.
type Flights[V any] struct {
	mu    sync.Mutex
	m     map[FlightKey]*Flight[V]
	kept  int // outcomes kept, not yet recorded
	limit int
	// free holds the flights of keys no longer in hand, with their turn
	// channels, for the next keys: a W1 run takes three.
	free []*Flight[V]
}

// FlightKey names a run's tool call (Call set) or a run's step.
type FlightKey struct {
	Run, Call string
	Step      int
}

// maxFreeFlights bounds the flights kept for reuse.
const maxFreeFlights = 256

// A flight is a key's: its turn and its outcome not yet recorded.
type Flight[V any] struct {
	turn chan struct{} // holds a token while a delivery has the turn
	refs int           // deliveries that have or wait for the turn
	val  V
	has  bool
}

// MaxUnrecorded is the number of outcomes an agent's handlers keep, of
// each kind (tool results, model responses), beyond which a new call waits.
const MaxUnrecorded = 10_000

// errTooManyUnrecorded refuses a call while too many outcomes wait for
// the store.
var errTooManyUnrecorded = errors.New("agent: too many results wait to be recorded")

// NewFlights returns flights that keep at most limit outcomes not yet
// recorded.
func NewFlights[V any](limit int) *Flights[V] {
	return &Flights[V]{m: map[FlightKey]*Flight[V]{}, limit: limit}
}

// Enter waits for the turn of key, and returns its flight, which the
// caller holds until it calls Leave.
func (f *Flights[V]) Enter(ctx context.Context, key FlightKey) (*Flight[V], error) {
	f.mu.Lock()
	fl := f.m[key]
	if fl == nil {
		if n := len(f.free); n > 0 {
			fl = f.free[n-1]
			f.free[n-1] = nil
			f.free = f.free[:n-1]
		} else {
			fl = &Flight[V]{turn: make(chan struct{}, 1)}
		}
		f.m[key] = fl
	}
	fl.refs++
	f.mu.Unlock()
	select {
	case fl.turn <- struct{}{}:
		return fl, nil
	case <-ctx.Done():
		f.release(key, fl)
		return nil, context.Cause(ctx)
	}
}

// Busy reports whether a delivery has or waits for the turn of key.
func (f *Flights[V]) Busy(key FlightKey) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.m[key] != nil && f.m[key].refs > 0
}

// Leave gives the turn of key up. With handled, the delivery was handled:
// what the flight kept is no longer needed.
func (f *Flights[V]) Leave(key FlightKey, fl *Flight[V], handled bool) {
	if handled {
		f.Drop(fl)
	}
	<-fl.turn
	f.release(key, fl)
}

// release counts a delivery of key out of fl, and frees fl when none
// holds it and it keeps nothing.
func (f *Flights[V]) release(key FlightKey, fl *Flight[V]) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fl.refs--
	if fl.refs == 0 && !fl.has {
		delete(f.m, key)
		// No delivery holds it now: its turn is free, its outcome none.
		if len(f.free) < maxFreeFlights {
			f.free = append(f.free, fl)
		}
	}
}

// Outcome returns what fl keeps.
func (f *Flights[V]) Outcome(fl *Flight[V]) (V, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return fl.val, fl.has
}

// Keep keeps v in fl until it is dropped.
func (f *Flights[V]) Keep(fl *Flight[V], v V) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !fl.has {
		f.kept++
	}
	fl.val, fl.has = v, true
}

// Drop forgets what fl keeps: it is recorded, or no longer needed.
func (f *Flights[V]) Drop(fl *Flight[V]) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if fl.has {
		f.kept--
		var zero V
		fl.val, fl.has = zero, false
	}
}

// Admit returns an outage error when too many outcomes wait to be
// recorded.
func (f *Flights[V]) Admit() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.kept >= f.limit {
		return calf.Unavailable(errTooManyUnrecorded)
	}
	return nil
}
