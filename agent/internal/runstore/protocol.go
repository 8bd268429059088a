//lint:file-ignore U1000 the protocols' methods are reached through the generic protocol interface, which the unused check does not follow for generic types

package runstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent/internal/records"
	"github.com/calf-go/calf/store"
)

// protocol is what the shared store protocol and the local shortcut do
// differently (see storedRuns and localRuns).
type protocol[S comparable, R any] interface {
	// loadStep is Load for the model call of step.
	loadStep(ctx context.Context, s *Store[S, R], id string, step int) (S, int64, error)
	// created keeps the state st of a run this process created, stored
	// as data at version.
	created(s *Store[S, R], id string, data []byte, version int64, st S)
	// toolResult returns the result recorded for the call of run id;
	// found is false when there is none.
	toolResult(ctx context.Context, s *Store[S, R], id, call string) (res R, found bool, err error)
	// recordToolResult records res, encoded as data, as the result of its
	// call of run id, and returns the result recorded for the call: res,
	// or one that another delivery recorded first. t, when not nil, takes
	// a result into a run's state: a protocol may record the result with
	// it, in the run's own record, in place of a record of its own.
	recordToolResult(ctx context.Context, s *Store[S, R], id string, res R, data []byte, t Taker[S, R]) (R, error)
}

var (
	_ protocol[*struct{}, struct{}] = storedRuns[*struct{}, struct{}]{}
	_ protocol[*struct{}, struct{}] = localRuns[*struct{}, struct{}]{}
)

// storedRuns is the shared store protocol: every read of a run that may
// have moved on goes to the store, and a tool's result is a record of its
// own (kind tool_result, id run/call), created once, which the
// tool-result handler then takes into the run.
type storedRuns[S comparable, R any] struct{}

func (storedRuns[S, R]) loadStep(ctx context.Context, s *Store[S, R], id string, step int) (S, int64, error) {
	return s.Load(ctx, id)
}

func (storedRuns[S, R]) created(s *Store[S, R], id string, data []byte, version int64, st S) {
	s.cache.Put(id, data, version, st)
}

func (storedRuns[S, R]) toolResult(ctx context.Context, s *Store[S, R], id, call string) (R, bool, error) {
	return s.getToolResult(ctx, id, call)
}

func (storedRuns[S, R]) recordToolResult(ctx context.Context, s *Store[S, R], id string, res R, data []byte, t Taker[S, R]) (R, error) {
	_, call := s.runs.Call(res)
	res, _, err := s.putToolResult(ctx, id, call, res, data)
	return res, err
}

// localRuns is the run store of a runtime whose broker is local
// (calf.IsLocal): every handler of a run this process created runs here,
// so the state it cached is behind the store only where another writer (a
// cancel, a pause, another process's command) changed the run, which the
// compare-and-swap of the next write finds. It takes a model call's state
// and a tool call's missing result from the cache instead of reading the
// store, and records a tool's result in the run's own record, with the
// step's advance: one write where a result recorded on its own, then taken
// into the run by the tool-result handler, takes two
// (docs/benchmarks/2026-11-27-local-shortcut.md). The result is as durable as in a record of its
// own, and what the tool-result handler then finds in the process's copy
// of the run leaves it nothing to write (see Store.Answered).
type localRuns[S comparable, R any] struct{}

// loadStep takes the cached state when it shows the call due (a stale
// copy, written over since by a cancel or a pause, makes the write of the
// model's answer conflict, and that answer is then dropped, as it is when
// the cancel comes during the call); otherwise, it reads the store.
func (localRuns[S, R]) loadStep(ctx context.Context, s *Store[S, R], id string, step int) (S, int64, error) {
	st, version, ok, err := s.Latest(ctx, id)
	if err != nil {
		var zero S
		return zero, 0, err
	}
	if ok && s.runs.Due(st, step) {
		return st, version, nil
	}
	return s.Load(ctx, id)
}

// created marks a run it creates as born here: its calls' results, which
// no other process records, are looked for in the cache.
func (localRuns[S, R]) created(s *Store[S, R], id string, data []byte, version int64, st S) {
	s.cache.PutBorn(id, data, version, st)
}

// toolResult finds no result, without reading the store, for a call of a
// run this process created and for which it recorded none: no one else
// has.
func (localRuns[S, R]) toolResult(ctx context.Context, s *Store[S, R], id, call string) (R, bool, error) {
	if s.cache.Unrecorded(id, call) {
		var zero R
		return zero, false, nil
	}
	return s.getToolResult(ctx, id, call)
}

// recordToolResult records the result in the run's own record for a run
// this process created, while the run waits for the call; otherwise (the
// run was created elsewhere, or no longer waits: another process ended
// it) as a record of its own.
func (l localRuns[S, R]) recordToolResult(ctx context.Context, s *Store[S, R], id string, res R, data []byte, t Taker[S, R]) (R, error) {
	step, call := s.runs.Call(res)
	if t != nil && s.cache.Unrecorded(id, call) {
		recorded, done, err := l.recordInRun(ctx, s, id, step, call, res, t)
		if err != nil {
			var zero R
			return zero, err
		}
		if done {
			s.cache.RecordedResult(id, call)
			return recorded, nil
		}
	}
	recorded, kept, err := s.putToolResult(ctx, id, call, res, data)
	if kept {
		s.cache.RecordedResult(id, call)
	}
	return recorded, err
}

// recordInRun records the result res of the call of step of run id in
// the run's own record with t. It returns the result the run holds for
// the call (res, or one an earlier delivery recorded) and done true, or
// done false when the run no longer waits for the call and nothing was
// written.
func (localRuns[S, R]) recordInRun(ctx context.Context, s *Store[S, R], id string, step int, call string, res R, t Taker[S, R]) (recorded R, done bool, err error) {
	_, err = s.Update(ctx, id, func(st S) (bool, error) {
		recorded, done = res, false
		if !s.runs.Awaits(st, step) {
			return false, nil
		}
		if r, ok := s.runs.ResultFor(st, step, call); ok {
			recorded, done = r, true
			return false, nil
		}
		changed, err := t.TakeResult(st, res)
		done = changed && err == nil
		return changed, err
	})
	return recorded, done, err
}

// getToolResult reads the result recorded as a record of its own for the
// call of run id; found is false when there is none.
func (s *Store[S, R]) getToolResult(ctx context.Context, id, call string) (res R, found bool, err error) {
	rec, err := s.store.Get(ctx, store.KindToolResult, id+"/"+call)
	if errors.Is(err, store.ErrNotFound) {
		return res, false, nil
	}
	if err != nil {
		return res, false, err
	}
	res, err = decodeToolResult[R](rec.Data)
	return res, err == nil, err
}

// putToolResult records res, encoded as data, as a record of its own, and
// returns the result recorded for the call: res, or one that another
// delivery recorded first. kept reports that the call has a record, even
// when err says the one recorded first could not be read.
func (s *Store[S, R]) putToolResult(ctx context.Context, id, call string, res R, data []byte) (recorded R, kept bool, err error) {
	key := id + "/" + call
	_, err = s.store.Put(ctx, store.KindToolResult, key, data, 0)
	if errors.Is(err, store.ErrConflict) {
		// Another delivery recorded first: its result stands.
		rec, err := s.store.Get(ctx, store.KindToolResult, key)
		if err != nil {
			return recorded, true, err
		}
		recorded, err = decodeToolResult[R](rec.Data)
		return recorded, true, err
	}
	return res, err == nil, err
}

// decodeToolResult decodes a recorded tool result.
func decodeToolResult[R any](data []byte) (R, error) {
	var res R
	if err := json.Unmarshal(data, &res); err != nil {
		var zero R
		return zero, calf.Permanent(fmt.Errorf("%w: tool result: %v", records.ErrCorrupt, err))
	}
	return res, nil
}
