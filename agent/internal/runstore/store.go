package runstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent/internal/records"
	"github.com/calf-go/calf/store"
)

// Store is how the engine reads and writes runs, of state S, and their
// tool results, of type R: the handlers and the runtime call it, and never
// ask whether the broker is local. What differs between the two protocols
// it may follow is its protocol, picked once, when the runtime is made
// (New): storedRuns, the shared store protocol every process of a
// distributed deployment follows, or localRuns, its shortcut for a broker
// in the process (calf.IsLocal).
//
// It keeps the last decoded state of recently active runs (Cache), so that
// a run this process wrote or read a moment ago is not decoded again, and
// can be written at its known version without being read first.
//
// Store is a struct over an interface, rather than the interface itself,
// so that the functions the handlers give it (the updates of a run) are
// called directly and stay on the handler's stack: given to an interface
// method, each would be allocated on every call.
type Store[S comparable, R any] struct {
	store    store.Store
	runs     Runs[S, R]
	cache    *Cache[S]
	protocol protocol[S, R]
}

// Runs is what a Store needs to know of the engine's run states S and tool
// results R, and the engine's part of reading and writing them.
type Runs[S comparable, R any] interface {
	// Decode decodes a run's record; an error matching
	// records.ErrCorrupt says it is not a run's.
	Decode(data []byte) (S, error)
	// Clone returns a copy of st that the cache's copy does not see
	// changed by what the engine does to it.
	Clone(st S) S
	// Encode encodes st as its run's record.
	Encode(st S) ([]byte, error)
	// ID returns the id of st's run.
	ID(st S) string
	// ReadBack makes st, as decoded from its record, whole, reading what
	// the record refers to, and reports whether there was anything to
	// read (a state that was whole is not changed).
	ReadBack(ctx context.Context, st S) (read bool, err error)
	// Archive moves what st's record would hold of old to records of
	// their own, before st is written.
	Archive(ctx context.Context, st S) error

	// Call returns the step and the id of the tool call res answers.
	Call(res R) (step int, id string)
	// Due reports whether the run st is at the model call of step, not
	// ended and not paused.
	Due(st S, step int) bool
	// Awaits reports whether the run st waits for the results of the tool
	// calls of step, not ended.
	Awaits(st S, step int) bool
	// Answered reports whether st holds the result of the call id of step.
	Answered(st S, step int, id string) bool
	// ResultFor returns the result st holds for the call id of step.
	ResultFor(st S, step int, id string) (R, bool)
}

// A Taker takes the tool result res into the run st, and reports whether
// that changed it (see Store.RecordToolResult).
type Taker[S, R any] interface {
	TakeResult(st S, res R) (changed bool, err error)
}

// A CreateFunc is given the stored record of a run, if there is one
// (exists), and returns the record to write (nil: none) and, when it made
// a new run, its state (the zero S otherwise), which the run's next
// handler then finds decoded.
type CreateFunc[S any] func(data []byte, exists bool) (out []byte, made S, err error)

// An UpdateFunc changes a run's state, and reports whether it did.
type UpdateFunc[S any] func(st S) (changed bool, err error)

// New returns the run store of runs over s: with the local shortcut when
// local (the broker is in the process), with the shared store protocol
// otherwise.
func New[S comparable, R any](s store.Store, runs Runs[S, R], local bool) *Store[S, R] {
	rs := &Store[S, R]{store: s, runs: runs, cache: NewCache(DefaultSize, DefaultBytes, runs.Decode, runs.Clone), protocol: storedRuns[S, R]{}}
	if local {
		rs.protocol = localRuns[S, R]{}
	}
	return rs
}

// Load reads run id and the version it is stored at, for a handler. A
// missing or corrupt run is permanent: state is saved before any event
// that refers to it is emitted.
func (s *Store[S, R]) Load(ctx context.Context, id string) (S, int64, error) {
	var zero S
	rec, err := s.store.Get(ctx, store.KindRun, id)
	if errors.Is(err, store.ErrNotFound) {
		return zero, 0, calf.Permanent(fmt.Errorf("agent: load run %s: %w", id, err))
	}
	if err != nil {
		return zero, 0, fmt.Errorf("agent: load run %s: %w", id, err)
	}
	st, err := s.cache.Decode(id, rec.Data, rec.Version)
	if err != nil {
		return zero, 0, calf.Permanent(err)
	}
	if err := s.readBackCached(ctx, id, st, rec); err != nil {
		return zero, 0, err
	}
	return st, rec.Version, nil
}

// LoadStep is Load for the model call of step, which may take the state
// from the process's cache (see localRuns.loadStep).
func (s *Store[S, R]) LoadStep(ctx context.Context, id string, step int) (S, int64, error) {
	return s.protocol.loadStep(ctx, s, id, step)
}

// Read is Load for the runtime's own use (loading a run for its caller,
// waiting for it, ...): its errors are not marked permanent.
func (s *Store[S, R]) Read(ctx context.Context, id string) (S, error) {
	var zero S
	rec, err := s.store.Get(ctx, store.KindRun, id)
	if err != nil {
		return zero, fmt.Errorf("agent: load run %s: %w", id, err)
	}
	st, err := s.cache.Decode(id, rec.Data, rec.Version)
	if err != nil {
		return zero, err
	}
	if err := s.readBackCached(ctx, id, st, rec); err != nil {
		return zero, err
	}
	return st, nil
}

// Latest returns the state of run id this process wrote or read lately,
// with its version, without reading the store; ok is false when there is
// none. It may be behind the store: a caller acts on it only where what
// it shows is still true of the stored run, and calls Load where it is
// not.
func (s *Store[S, R]) Latest(ctx context.Context, id string) (S, int64, bool, error) {
	var zero S
	st, rec, ok := s.cache.Latest(id)
	if !ok {
		return zero, 0, false, nil
	}
	if err := s.readBackCached(ctx, id, st, rec); err != nil {
		return zero, 0, false, err
	}
	return st, rec.Version, true, nil
}

// Version returns the version of run id that this process last wrote or
// read, or -1 when it does not know it.
func (s *Store[S, R]) Version(id string) int64 {
	if rec, ok := s.cache.Record(id); ok {
		return rec.Version
	}
	return -1
}

// readBackCached makes st, the state of run id decoded from rec, whole
// (see Runs.ReadBack), and caches the whole state.
func (s *Store[S, R]) readBackCached(ctx context.Context, id string, st S, rec store.Record) error {
	read, err := s.runs.ReadBack(ctx, st)
	if err != nil || !read {
		return err
	}
	s.cache.Put(id, rec.Data, rec.Version, st)
	return nil
}

// Create creates run id, or updates it when it exists, with a
// compare-and-swap: see CreateFunc.
func (s *Store[S, R]) Create(ctx context.Context, id string, fn CreateFunc[S]) error {
	var zero, made S
	var created []byte
	rec, err := store.CreateOrUpdate(ctx, s.store, store.KindRun, id, func(data []byte, exists bool) ([]byte, error) {
		out, st, err := fn(data, exists)
		made, created = st, nil
		if st != zero {
			created = out
		}
		return out, err
	})
	if errors.Is(err, records.ErrCorrupt) {
		return calf.Permanent(err)
	}
	if err != nil {
		return err
	}
	if created != nil {
		s.protocol.created(s, id, created, rec.Version, made) // the next handler of the run finds it decoded
	}
	return nil
}

// Update applies fn to the stored run with a compare-and-swap. fn reports
// whether it changed the state; the state it saw (changed or not) is
// returned. When this process wrote or read the run lately, fn is first
// applied to the cached state, which is written at its version without
// reading the run; fn is applied again to the stored state if that write
// conflicts or fn changes nothing in the cached one.
func (s *Store[S, R]) Update(ctx context.Context, id string, fn UpdateFunc[S]) (S, error) {
	return s.update(ctx, id, true, fn)
}

// update is Update, which uses the cached state only if cache is true.
func (s *Store[S, R]) update(ctx context.Context, id string, cache bool, fn UpdateFunc[S]) (S, error) {
	var zero, out S
	var wrote bool
	apply := func(data []byte, exists bool) ([]byte, error) {
		out, wrote = zero, false
		if !exists {
			return nil, fmt.Errorf("agent: run %s: %w", id, store.ErrNotFound)
		}
		st, err := s.cache.Decode(id, data, 0)
		if err != nil {
			return nil, err
		}
		changed, err := fn(st)
		out = st
		if err != nil || !changed {
			return nil, err
		}
		if err := s.runs.Archive(ctx, st); err != nil {
			return nil, err
		}
		wrote = true
		return s.runs.Encode(st)
	}
	var rec store.Record
	var err error
	if known, ok := s.cache.Record(id); ok && cache {
		rec, err = store.UpdateFrom(ctx, s.store, known, apply)
	} else {
		rec, err = store.Update(ctx, s.store, store.KindRun, id, apply)
	}
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, records.ErrCorrupt) {
		return zero, calf.Permanent(err)
	}
	if err != nil {
		return zero, err
	}
	if wrote {
		s.cache.Put(id, rec.Data, rec.Version, out)
	}
	return out, nil
}

// UpdateFrom is Update for a state the handler has just loaded at
// version: it applies fn to st and writes it without reading the run
// again, and only on a conflict (another delivery wrote meanwhile) falls
// back to Update. fn may be applied to st even when the write then
// conflicts.
func (s *Store[S, R]) UpdateFrom(ctx context.Context, st S, version int64, fn UpdateFunc[S]) (S, error) {
	var zero S
	changed, err := fn(st)
	if err != nil || !changed {
		return st, err
	}
	if err := s.runs.Archive(ctx, st); err != nil {
		return zero, err
	}
	data, err := s.runs.Encode(st)
	if err != nil {
		return zero, err
	}
	id := s.runs.ID(st)
	v, err := s.store.Put(ctx, store.KindRun, id, data, version)
	if errors.Is(err, store.ErrConflict) {
		return s.update(ctx, id, false, fn) // the cache holds st, which is stale
	}
	if err != nil {
		return zero, err
	}
	s.cache.Put(id, data, v, st)
	return st, nil
}

// Forget drops what the process keeps of run id, which another writer (a
// cancel, a pause) changed behind the handlers.
func (s *Store[S, R]) Forget(id string) { s.cache.Forget(id) }

// Answered returns the state of run id this process keeps when it already
// holds the result res (the stored run, which is never behind it, holds it
// too, and there is nothing to write); ok is false otherwise.
func (s *Store[S, R]) Answered(ctx context.Context, id string, res R) (S, bool, error) {
	var zero S
	step, call := s.runs.Call(res)
	st, rec, ok := s.cache.LatestIf(id, func(st S) bool { return s.runs.Answered(st, step, call) })
	if !ok {
		return zero, false, nil
	}
	if err := s.readBackCached(ctx, id, st, rec); err != nil {
		return zero, false, err
	}
	return st, true, nil
}

// ToolResult returns the result recorded for the call of run id; found is
// false when there is none.
func (s *Store[S, R]) ToolResult(ctx context.Context, id, call string) (res R, found bool, err error) {
	return s.protocol.toolResult(ctx, s, id, call)
}

// RecordToolResult records res, encoded as data, as the result of its call
// of run id, and returns the result recorded for the call: res, or one
// that another delivery recorded first. t, when not nil, takes a result
// into a run (see protocol).
func (s *Store[S, R]) RecordToolResult(ctx context.Context, id string, res R, data []byte, t Taker[S, R]) (R, error) {
	return s.protocol.recordToolResult(ctx, s, id, res, data, t)
}
