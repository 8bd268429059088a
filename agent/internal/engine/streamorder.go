package engine

import (
	"context"
	"errors"
	"time"

	"github.com/calf-go/calf"
)

// StreamEndGrace is how long a stream waits, once a run's end has come,
// for the tool calls that its held events wait for: on a broker with a
// topic per channel they may come after the output, but a call that never
// comes must not hold up the end of the stream.
const StreamEndGrace = 2 * time.Second

// ErrEndGraceOver reports that [StreamEndGrace] passed.
var ErrEndGraceOver = errors.New("agent: stream end grace over")

// An OrderKind says how an event takes part in a stream's order.
type OrderKind int

// The kinds of [Ordered] events.
const (
	// OrderNow is an event due at once (after the held events before it).
	OrderNow OrderKind = iota
	// OrderInference is a step's inference.
	OrderInference
	// OrderDelta is a delta of a step, due once the step's inference is.
	OrderDelta
	// OrderCall is a tool call, due once its step's inference and the
	// deltas it counts are.
	OrderCall
	// OrderAfterCall is an event about a tool call, due once the call is.
	OrderAfterCall
	// OrderEnd is a run's end (its output or handoff), due once the
	// deltas of its step are.
	OrderEnd
)

// Ordered is what the order of a stream needs to know of an event.
type Ordered struct {
	Kind OrderKind
	// Run is the id of the run of the event.
	Run  string
	Step int
	// Call is the id of the tool call of an OrderCall, or the one an
	// OrderAfterCall waits for.
	Call string
	// Deltas is how many deltas of its step an OrderCall or an OrderEnd
	// waits for.
	Deltas int
	// HandsOffTo is the run an OrderEnd hands off to, if any.
	HandsOffTo string
}

// StreamOrder restores causal order for the stream of a run. A tool call
// travels under its own key (so that the calls of a step run in parallel),
// and so may reach an observer before the inference of its step, before
// the deltas of its step, or after its result. StreamOrder holds a tool
// call until the inference of its step and the deltas the call counts have
// been yielded; an event about a call, with every event after it, until
// the call has been yielded; and the run's end until the deltas of its
// step have been: once the run's end has come, for at most
// [StreamEndGrace]. A delta is yielded as soon as the inference of its
// step has been.
//
// E is the stream's event type, which of describes.
type StreamOrder[E any] struct {
	of     func(E) Ordered
	called map[string]bool
	step   int          // the last inference step yielded
	deltas map[int]int  // deltas yielded, by step
	held   []ordered[E] // events waiting for a tool call or deltas
	early  []ordered[E] // deltas waiting for their step's inference; tool calls, for it and its deltas
}

// ordered is an event with what of says of it.
type ordered[E any] struct {
	o  Ordered
	ev E
}

// NewStreamOrder returns the order of a run's stream of events described
// by of.
func NewStreamOrder[E any](of func(E) Ordered) *StreamOrder[E] {
	return &StreamOrder[E]{of: of, called: map[string]bool{}, deltas: map[int]int{}}
}

// Add takes ev and returns the events now due, in order.
func (o *StreamOrder[E]) Add(ev E) []E {
	e := ordered[E]{o.of(ev), ev}
	if e.o.Kind == OrderCall || e.o.Kind == OrderDelta {
		o.early = append(o.early, e)
	} else {
		o.held = append(o.held, e)
	}
	return o.release(nil)
}

// Ended reports whether the run's end is held.
func (o *StreamOrder[E]) Ended() bool {
	for _, e := range o.held {
		if e.o.Kind == OrderEnd {
			return true
		}
	}
	return false
}

// Flush returns every event held, the early tool calls and deltas first.
func (o *StreamOrder[E]) Flush() []E {
	out := make([]E, 0, len(o.early)+len(o.held))
	for _, c := range o.early {
		if c.o.Kind == OrderCall {
			o.called[c.o.Call] = true
		}
		out = append(out, c.ev)
	}
	for _, e := range o.held {
		out = append(out, e.ev)
	}
	o.early, o.held = nil, nil
	return out
}

// release appends to out the early deltas and tool calls that are now due
// and the held events up to the first that must still wait.
func (o *StreamOrder[E]) release(out []E) []E {
	for {
		for again := true; again; {
			again = false
			rest := o.early[:0]
			for _, c := range o.early {
				switch {
				case c.o.Kind == OrderDelta && c.o.Step <= o.step:
					o.deltas[c.o.Step]++
					out = append(out, c.ev)
					again = true // a call may have waited for it
				case c.o.Kind == OrderCall && c.o.Step <= o.step && o.deltas[c.o.Step] >= c.o.Deltas:
					o.called[c.o.Call] = true
					out = append(out, c.ev)
				default:
					rest = append(rest, c)
				}
			}
			o.early = rest
		}
		if len(o.held) == 0 || !o.due(o.held[0].o) {
			return out
		}
		e := o.held[0]
		o.held = o.held[1:]
		out = append(out, e.ev)
		if e.o.Kind == OrderInference {
			o.step = max(o.step, e.o.Step)
		}
	}
}

// due reports whether a held event may be yielded.
func (o *StreamOrder[E]) due(e Ordered) bool {
	switch e.Kind {
	case OrderAfterCall:
		return o.called[e.Call]
	case OrderEnd:
		return o.deltas[e.Step] >= e.Deltas
	}
	return true
}

// ChainOrder restores causal order for a stream over a handoff chain: each
// run's events in the order of its own [StreamOrder], and the events of a
// run that continues a handoff only after the end that hands off to it.
type ChainOrder[E any] struct {
	of      func(E) Ordered
	runs    map[string]*StreamOrder[E]
	waiting map[string][]E // events of runs not yet handed off to
}

// NewChainOrder returns the order of the stream of a chain that starts
// with the run first, of events described by of.
func NewChainOrder[E any](first string, of func(E) Ordered) *ChainOrder[E] {
	return &ChainOrder[E]{
		of:      of,
		runs:    map[string]*StreamOrder[E]{first: NewStreamOrder(of)},
		waiting: map[string][]E{},
	}
}

// Add takes ev and returns the events now due, in order.
func (c *ChainOrder[E]) Add(ev E) []E {
	run := c.of(ev).Run
	o, ok := c.runs[run]
	if !ok {
		c.waiting[run] = append(c.waiting[run], ev)
		return nil
	}
	return c.expand(o.Add(ev))
}

// expand returns pending, each end that hands off followed by the events
// of the run it hands off to that were waiting for it.
func (c *ChainOrder[E]) expand(pending []E) []E {
	var out []E
	for len(pending) > 0 {
		e := pending[0]
		pending = pending[1:]
		out = append(out, e)
		o := c.of(e)
		if o.Kind != OrderEnd || o.HandsOffTo == "" {
			continue
		}
		next := o.HandsOffTo
		if _, ok := c.runs[next]; ok {
			continue
		}
		no := NewStreamOrder(c.of)
		c.runs[next] = no
		for _, w := range c.waiting[next] {
			pending = append(pending, no.Add(w)...)
		}
		delete(c.waiting, next)
	}
	return out
}

// Next returns the next message of f. Once a run of the chain has ended
// with events held, it waits at most [StreamEndGrace], then fails with
// [ErrEndGraceOver].
func (c *ChainOrder[E]) Next(ctx context.Context, f *calf.Follower) (*calf.Message, error) {
	if !c.Ended() {
		return f.Next(ctx)
	}
	gctx, cancel := context.WithTimeout(ctx, StreamEndGrace)
	defer cancel()
	m, err := f.Next(gctx)
	if err != nil && ctx.Err() == nil && gctx.Err() != nil {
		return nil, ErrEndGraceOver
	}
	return m, err
}

// Ended reports whether a run of the chain has ended with events held.
func (c *ChainOrder[E]) Ended() bool {
	for _, o := range c.runs {
		if o.Ended() {
			return true
		}
	}
	return false
}

// Flush returns the events held by the runs that have ended.
func (c *ChainOrder[E]) Flush() []E {
	var out []E
	for _, o := range c.runs {
		if o.Ended() {
			out = append(out, c.expand(o.Flush())...)
		}
	}
	return out
}
