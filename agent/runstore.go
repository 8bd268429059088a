package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent/internal/runstore"
	"github.com/calf-go/calf/store"
)

// runStore is how the engine reads and writes runs and their tool
// results: the handlers and the runtime call it, and never ask whether the
// broker is local. What differs between the two protocols it may follow is
// its runProtocol, picked once, when the runtime is made (newRunStore):
// storedRuns, the shared store protocol every process of a distributed
// deployment follows, or localRuns, its shortcut for a broker in the
// process (calf.IsLocal).
//
// It keeps the last decoded state of recently active runs (runstore.Cache), so
// that a run this process wrote or read a moment ago is not decoded again,
// and can be written at its known version without being read first.
//
// runStore is a struct over an interface, rather than the interface
// itself, so that the functions the handlers give it (the updates of a
// run) are called directly and stay on the handler's stack: given to an
// interface method, each would be allocated on every call.
type runStore struct {
	rt       *Runtime // its store, and the sessions and archives a run's record refers to
	cache    *runstore.Cache[*runState]
	protocol runProtocol
}

// runProtocol is what the shared store protocol and the local shortcut do
// differently (see storedRuns and localRuns).
type runProtocol interface {
	// loadStep is load for the model call of step.
	loadStep(ctx context.Context, s *runStore, id string, step int) (*runState, int64, error)
	// created keeps the state st of a run this process created, stored
	// as data at version.
	created(s *runStore, id string, data []byte, version int64, st *runState)
	// toolResult returns the result recorded for the call of run id;
	// found is false when there is none.
	toolResult(ctx context.Context, s *runStore, id, call string) (res ToolResultEvent, found bool, err error)
	// recordToolResult records res, encoded as data, as the result of its
	// call of run id, and returns the result recorded for the call: res,
	// or one that another delivery recorded first. t, when not nil, takes
	// a result into a run's state (see handlers.takeResult): a protocol
	// may record the result with it, in the run's own record, in place of
	// a record of its own.
	recordToolResult(ctx context.Context, s *runStore, id string, res ToolResultEvent, data []byte, t resultTaker) (ToolResultEvent, error)
}

// A resultTaker takes the tool result ev into the run st, and reports
// whether that changed it.
type resultTaker interface {
	takeResult(st *runState, ev ToolResultEvent) (changed bool, err error)
}

// A createFunc is given the stored record of a run, if there is one
// (exists), and returns the record to write (nil: none) and, when it made
// a new run, its state, which the run's next handler then finds decoded.
type createFunc func(data []byte, exists bool) (out []byte, made *runState, err error)

// An updateFunc changes a run's state, and reports whether it did.
type updateFunc func(st *runState) (changed bool, err error)

// newRunStore returns the run store of rt: with the local shortcut on a
// local broker, with the shared store protocol on any other.
func newRunStore(rt *Runtime, local bool) *runStore {
	s := &runStore{rt: rt, cache: runstore.NewCache(runstore.DefaultSize, decodeRunState, (*runState).clone), protocol: storedRuns{}}
	if local {
		s.protocol = localRuns{}
	}
	return s
}

// load reads run id and the version it is stored at, for a handler. A
// missing or corrupt run is permanent: state is saved before any event
// that refers to it is emitted.
func (s *runStore) load(ctx context.Context, id string) (*runState, int64, error) {
	rec, err := s.rt.store.Get(ctx, store.KindRun, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, 0, calf.Permanent(fmt.Errorf("agent: load run %s: %w", id, err))
	}
	if err != nil {
		return nil, 0, fmt.Errorf("agent: load run %s: %w", id, err)
	}
	st, err := s.cache.Decode(id, rec.Data, rec.Version)
	if err != nil {
		return nil, 0, calf.Permanent(err)
	}
	if err := s.readBackCached(ctx, st, rec); err != nil {
		return nil, 0, err
	}
	return st, rec.Version, nil
}

// loadStep is load for the model call of step, which may take the state
// from the process's cache (see localRuns.loadStep).
func (s *runStore) loadStep(ctx context.Context, id string, step int) (*runState, int64, error) {
	return s.protocol.loadStep(ctx, s, id, step)
}

// read is load for the runtime's own use (LoadRun, Wait, ...): its errors
// are not marked permanent.
func (s *runStore) read(ctx context.Context, id string) (*runState, error) {
	rec, err := s.rt.store.Get(ctx, store.KindRun, id)
	if err != nil {
		return nil, fmt.Errorf("agent: load run %s: %w", id, err)
	}
	st, err := s.cache.Decode(id, rec.Data, rec.Version)
	if err != nil {
		return nil, err
	}
	if err := s.readBackCached(ctx, st, rec); err != nil {
		return nil, err
	}
	return st, nil
}

// latest returns the state of run id this process wrote or read lately,
// with its version, without reading the store; ok is false when there is
// none. It may be behind the store: a caller acts on it only where what
// it shows is still true of the stored run, and calls load where it is
// not.
func (s *runStore) latest(ctx context.Context, id string) (*runState, int64, bool, error) {
	st, rec, ok := s.cache.Latest(id)
	if !ok {
		return nil, 0, false, nil
	}
	if err := s.readBackCached(ctx, st, rec); err != nil {
		return nil, 0, false, err
	}
	return st, rec.Version, true, nil
}

// version returns the version of run id that this process last wrote or
// read, or -1 when it does not know it.
func (s *runStore) version(id string) int64 {
	if rec, ok := s.cache.Record(id); ok {
		return rec.Version
	}
	return -1
}

// readBackCached makes st, a state decoded from rec, whole (see
// Runtime.readBack), and caches the whole state.
func (s *runStore) readBackCached(ctx context.Context, st *runState, rec store.Record) error {
	if !st.bare {
		return nil
	}
	if err := s.rt.readBack(ctx, st); err != nil {
		return err
	}
	s.cache.Put(st.RunID, rec.Data, rec.Version, st)
	return nil
}

// create creates run id, or updates it when it exists, with a
// compare-and-swap: see createFunc.
func (s *runStore) create(ctx context.Context, id string, fn createFunc) error {
	var made *runState
	var created []byte
	rec, err := store.CreateOrUpdate(ctx, s.rt.store, store.KindRun, id, func(data []byte, exists bool) ([]byte, error) {
		out, st, err := fn(data, exists)
		made, created = st, nil
		if st != nil {
			created = out
		}
		return out, err
	})
	if errors.Is(err, ErrCorruptState) {
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

// update applies fn to the stored run with a compare-and-swap. fn reports
// whether it changed the state; the state it saw (changed or not) is
// returned. When this process wrote or read the run lately, fn is first
// applied to the cached state, which is written at its version without
// reading the run; fn is applied again to the stored state if that write
// conflicts or fn changes nothing in the cached one.
func (s *runStore) update(ctx context.Context, id string, fn updateFunc) (*runState, error) {
	return s.updateRun(ctx, id, true, fn)
}

// updateRun is update, which uses the cached state only if cache is true.
func (s *runStore) updateRun(ctx context.Context, id string, cache bool, fn updateFunc) (*runState, error) {
	var out *runState
	var wrote bool
	apply := func(data []byte, exists bool) ([]byte, error) {
		out, wrote = nil, false
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
		if err := s.rt.archive(ctx, st); err != nil {
			return nil, err
		}
		wrote = true
		return st.encode()
	}
	var rec store.Record
	var err error
	if known, ok := s.cache.Record(id); ok && cache {
		rec, err = store.UpdateFrom(ctx, s.rt.store, known, apply)
	} else {
		rec, err = store.Update(ctx, s.rt.store, store.KindRun, id, apply)
	}
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, ErrCorruptState) {
		return nil, calf.Permanent(err)
	}
	if err != nil {
		return nil, err
	}
	if wrote {
		s.cache.Put(id, rec.Data, rec.Version, out)
	}
	return out, nil
}

// updateFrom is update for a state the handler has just loaded at version:
// it applies fn to st and writes it without reading the run again, and
// only on a conflict (another delivery wrote meanwhile) falls back to
// update. fn may be applied to st even when the write then conflicts.
func (s *runStore) updateFrom(ctx context.Context, st *runState, version int64, fn updateFunc) (*runState, error) {
	changed, err := fn(st)
	if err != nil || !changed {
		return st, err
	}
	if err := s.rt.archive(ctx, st); err != nil {
		return nil, err
	}
	data, err := st.encode()
	if err != nil {
		return nil, err
	}
	v, err := s.rt.store.Put(ctx, store.KindRun, st.RunID, data, version)
	if errors.Is(err, store.ErrConflict) {
		return s.updateRun(ctx, st.RunID, false, fn) // the cache holds st, which is stale
	}
	if err != nil {
		return nil, err
	}
	s.cache.Put(st.RunID, data, v, st)
	return st, nil
}

// forget drops what the process keeps of run id, which another writer (a
// cancel, a pause) changed behind the handlers.
func (s *runStore) forget(id string) { s.cache.Forget(id) }

// answered returns the state of run id this process keeps when it already
// holds the result ev (the stored run, which is never behind it, holds it
// too, and there is nothing to write); ok is false otherwise.
func (s *runStore) answered(ctx context.Context, id string, ev ToolResultEvent) (*runState, bool, error) {
	st, rec, ok := s.cache.LatestIf(id, func(st *runState) bool { return st.answered(ev.Step, ev.ToolCallID) })
	if !ok {
		return nil, false, nil
	}
	if err := s.readBackCached(ctx, st, rec); err != nil {
		return nil, false, err
	}
	return st, true, nil
}

// toolResult returns the result recorded for the call of run id; found is
// false when there is none.
func (s *runStore) toolResult(ctx context.Context, id, call string) (ToolResultEvent, bool, error) {
	return s.protocol.toolResult(ctx, s, id, call)
}

// recordToolResult records res, encoded as data, as the result of its call
// of run id, and returns the result recorded for the call: res, or one
// that another delivery recorded first. t, when not nil, takes a result
// into a run (see runProtocol).
func (s *runStore) recordToolResult(ctx context.Context, id string, res ToolResultEvent, data []byte, t resultTaker) (ToolResultEvent, error) {
	return s.protocol.recordToolResult(ctx, s, id, res, data, t)
}

// storedRuns is the shared store protocol: every read of a run that may
// have moved on goes to the store, and a tool's result is a record of its
// own (kind tool_result, id run/call), created once, which the
// tool-result handler then takes into the run.
type storedRuns struct{}

func (storedRuns) loadStep(ctx context.Context, s *runStore, id string, step int) (*runState, int64, error) {
	return s.load(ctx, id)
}

func (storedRuns) created(s *runStore, id string, data []byte, version int64, st *runState) {
	s.cache.Put(id, data, version, st)
}

func (storedRuns) toolResult(ctx context.Context, s *runStore, id, call string) (ToolResultEvent, bool, error) {

	rec, err := s.rt.store.Get(ctx, store.KindToolResult, id+"/"+call)
	if errors.Is(err, store.ErrNotFound) {
		return ToolResultEvent{}, false, nil
	}
	if err != nil {
		return ToolResultEvent{}, false, err
	}
	res, err := decodeToolResult(rec.Data)
	return res, err == nil, err
}

func (storedRuns) recordToolResult(ctx context.Context, s *runStore, id string, res ToolResultEvent, data []byte, t resultTaker) (ToolResultEvent, error) {
	res, _, err := s.putToolResult(ctx, id, res, data)
	return res, err
}

// putToolResult records res, encoded as data, as a record of its own, and
// returns the result recorded for the call: res, or one that another
// delivery recorded first. kept reports that the call has a record, even
// when err says the one recorded first could not be read.
func (s *runStore) putToolResult(ctx context.Context, id string, res ToolResultEvent, data []byte) (recorded ToolResultEvent, kept bool, err error) {
	key := id + "/" + res.ToolCallID
	_, err = s.rt.store.Put(ctx, store.KindToolResult, key, data, 0)
	if errors.Is(err, store.ErrConflict) {
		// Another delivery recorded first: its result stands.
		rec, err := s.rt.store.Get(ctx, store.KindToolResult, key)
		if err != nil {
			return ToolResultEvent{}, true, err
		}
		recorded, err = decodeToolResult(rec.Data)
		return recorded, true, err
	}
	return res, err == nil, err
}

// decodeToolResult decodes a recorded tool result.
func decodeToolResult(data []byte) (ToolResultEvent, error) {
	var ev ToolResultEvent
	if err := json.Unmarshal(data, &ev); err != nil {
		return ToolResultEvent{}, calf.Permanent(fmt.Errorf("%w: tool result: %v", ErrCorruptState, err))
	}
	return ev, nil
}

// localRuns is the run store of a runtime whose broker is local
// (calf.IsLocal): every handler of a run this process created runs here,
// so the state it cached is behind the store only where another writer (a
// cancel, a pause, another process's command) changed the run, which the
// compare-and-swap of the next write finds. It takes a model call's state
// and a tool call's missing result from the cache instead of reading the
// store, and records a tool's result in the run's own record, with the
// step's advance: one write where a result recorded on its own, then taken
// into the run by the tool-result handler, takes two (docs/benchmarks.md,
// "the local shortcut"). The result is as durable as in a record of its
// own, and what the tool-result handler then finds in the process's copy
// of the run leaves it nothing to write (see answered).
type localRuns struct{}

// loadStep takes the cached state when it shows the call due (a stale
// copy, written over since by a cancel or a pause, makes the write of the
// model's answer conflict, and that answer is then dropped, as it is when
// the cancel comes during the call); otherwise, it reads the store.
func (localRuns) loadStep(ctx context.Context, s *runStore, id string, step int) (*runState, int64, error) {
	st, version, ok, err := s.latest(ctx, id)
	if err != nil {
		return nil, 0, err
	}
	if ok && !st.Status.Terminal() && st.Step == step && st.Phase == phaseInference && st.Pause == nil {
		return st, version, nil
	}
	return s.load(ctx, id)
}

// created marks a run it creates as born here: its calls' results, which
// no other process records, are looked for in the cache.
func (localRuns) created(s *runStore, id string, data []byte, version int64, st *runState) {
	s.cache.PutBorn(id, data, version, st)
}

// toolResult finds no result, without reading the store, for a call of a
// run this process created and for which it recorded none: no one else
// has.
func (localRuns) toolResult(ctx context.Context, s *runStore, id, call string) (ToolResultEvent, bool, error) {
	if s.cache.Unrecorded(id, call) {
		return ToolResultEvent{}, false, nil
	}
	return storedRuns{}.toolResult(ctx, s, id, call)
}

// recordToolResult records the result in the run's own record for a run
// this process created, while the run waits for the call; otherwise (the
// run was created elsewhere, or no longer waits: another process ended
// it) as a record of its own.
func (l localRuns) recordToolResult(ctx context.Context, s *runStore, id string, res ToolResultEvent, data []byte, t resultTaker) (ToolResultEvent, error) {
	if t != nil && s.cache.Unrecorded(id, res.ToolCallID) {
		recorded, done, err := l.recordInRun(ctx, s, id, res, t)
		if err != nil {
			return ToolResultEvent{}, err
		}
		if done {
			s.cache.RecordedResult(id, res.ToolCallID)
			return recorded, nil
		}
	}
	recorded, kept, err := s.putToolResult(ctx, id, res, data)
	if kept {
		s.cache.RecordedResult(id, res.ToolCallID)
	}
	return recorded, err
}

// recordInRun records the result res of a call of run id in the run's own
// record with t. It returns the result the run holds for the call
// (res, or one an earlier delivery recorded) and done true, or done false
// when the run no longer waits for the call and nothing was written.
func (localRuns) recordInRun(ctx context.Context, s *runStore, id string, res ToolResultEvent, t resultTaker) (recorded ToolResultEvent, done bool, err error) {
	_, err = s.update(ctx, id, func(st *runState) (bool, error) {
		recorded, done = res, false
		if st.Status.Terminal() || st.Step != res.Step || st.Phase != phaseTools {
			return false, nil
		}
		if r, ok := st.resultFor(res.Step, res.ToolCallID); ok {
			recorded, done = r, true
			return false, nil
		}
		changed, err := t.takeResult(st, res)
		done = changed && err == nil
		return changed, err
	})
	return recorded, done, err
}
