package storetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/store/adapter"
)

// ErrInjected is the error a [FaultyStore] returns for the failures it
// injects. It is not [store.ErrConflict], [store.ErrNotFound] or any other
// error of the contract: a caller sees it as the store being unreachable.
var ErrInjected = errors.New("storetest: injected fault")

// Op names an operation of the store contract.
type Op string

// The operations of [store.Store] a [FaultyStore] can disturb.
const (
	OpGet    Op = "get"
	OpPut    Op = "put"
	OpDelete Op = "delete"
	OpList   Op = "list"
)

// Call describes one call of a [FaultyStore], as [Faults.Inject] sees it.
type Call struct {
	Op Op
	// Kind and ID are the call's arguments; ID is the prefix for List.
	Kind, ID string
	// Version is the expected version of a Put or a Delete.
	Version int64
	// N counts the calls of Op on this store, this one included: 1 for the
	// first Put, 2 for the second, and so on.
	N int64
}

// Fault is what a [FaultyStore] does to one call.
type Fault int

// The faults a [FaultyStore] injects.
const (
	// NoFault passes the call through.
	NoFault Fault = iota
	// Fail returns [ErrInjected] without doing anything: a write that did
	// not reach the store, or a read that failed.
	Fail
	// LostReply does the write, then returns [ErrInjected]: the write
	// landed but its reply was lost, so the caller cannot tell. Reads
	// treat it as Fail.
	LostReply
	// Conflict makes a Put return a conflict ([adapter.ConflictError])
	// without writing, as if another writer had been first, even though
	// the expected version matched. Other operations treat it as NoFault.
	Conflict
	// ConcurrentWrite has another writer write first, for real: before a
	// Put or Delete of an existing record, the record is written again
	// unchanged, which bumps its version, so a call that expected the old
	// version really conflicts; before a Put with version 0 of a missing
	// record, the record is created with the same data, as a duplicate of
	// the same write would. Reads treat it as NoFault.
	ConcurrentWrite
)

var faultNames = [...]string{"no fault", "fail", "lost reply", "conflict", "concurrent write"}

// String returns the fault's name.
func (f Fault) String() string {
	if f >= 0 && int(f) < len(faultNames) {
		return faultNames[f]
	}
	return fmt.Sprintf("Fault(%d)", int(f))
}

// Faults says which faults a [FaultyStore] injects. The zero value injects
// none. Rates are probabilities between 0 and 1, drawn for each call from
// a random source seeded with Seed, so that a failing test can be run
// again with the same draws (the order of concurrent calls still varies).
type Faults struct {
	// Seed seeds the random source of the rates. Default: 0, a fixed seed.
	Seed uint64
	// WriteFailRate is the rate of Puts and Deletes that fail without
	// writing ([Fail]).
	WriteFailRate float64
	// LostReplyRate is the rate of Puts and Deletes that write and then
	// fail ([LostReply]).
	LostReplyRate float64
	// ConflictRate is the rate of Puts of an existing record (version
	// above 0) that report a conflict without writing ([Conflict]). Puts
	// that create a record are spared: for them a conflict means that the
	// record exists, and [ConcurrentWrite] covers that truthfully.
	ConflictRate float64
	// ConcurrentWriteRate is the rate of Puts and Deletes that another
	// writer precedes ([ConcurrentWrite]).
	ConcurrentWriteRate float64
	// ReadFailRate is the rate of Gets and Lists that fail ([Fail]).
	ReadFailRate float64
	// ReadDelay makes every Get and List wait this long first (or until
	// its context ends): a slow store. Default: no delay.
	ReadDelay time.Duration
	// Kinds, when set, limits the faults (the delay included) to these
	// record kinds. Default: every kind.
	Kinds []string
	// Inject, when set, chooses the fault of each call before the rates
	// are drawn: a result other than [NoFault] is injected and the rates
	// are not consulted for that call. It is called concurrently from the
	// store's callers.
	Inject func(Call) Fault
}

// FaultStats counts the faults a [FaultyStore] has injected.
type FaultStats struct {
	Fails, LostReplies, Conflicts, ConcurrentWrites int64
	// Delayed counts the reads that waited for [Faults.ReadDelay].
	Delayed int64
}

// FaultyStore is a [store.Store] that passes calls to another store and
// injects the faults its [Faults] say: failed and ambiguous writes,
// conflicts, other writers racing the caller, failed and slow reads. Use
// it to check that code on top of a store keeps its promises when the
// store misbehaves. It is safe for concurrent use.
type FaultyStore struct {
	s store.Store
	f Faults

	mu  sync.Mutex
	rng *rand.Rand

	calls                                                 [4]atomic.Int64 // by op: get, put, delete, list
	fails, lost, conflicts, concurrent, delayed, disabled atomic.Int64
}

var _ store.Store = (*FaultyStore)(nil)

// WithFaults returns a store that injects f's faults into the calls it
// passes to s. Close closes s.
func WithFaults(s store.Store, f Faults) *FaultyStore {
	return &FaultyStore{s: s, f: f, rng: rand.New(rand.NewPCG(f.Seed, f.Seed^0x9e3779b97f4a7c15))}
}

// Unwrap returns the wrapped store.
func (s *FaultyStore) Unwrap() store.Store { return s.s }

// Stats returns the counts of the faults injected so far.
func (s *FaultyStore) Stats() FaultStats {
	return FaultStats{
		Fails: s.fails.Load(), LostReplies: s.lost.Load(), Conflicts: s.conflicts.Load(),
		ConcurrentWrites: s.concurrent.Load(), Delayed: s.delayed.Load(),
	}
}

// SetEnabled turns fault injection on or off; a new store has it on.
// Turn it off to read the outcome of a test through the same store.
func (s *FaultyStore) SetEnabled(on bool) {
	if on {
		s.disabled.Store(0)
	} else {
		s.disabled.Store(1)
	}
}

func opIndex(op Op) int {
	switch op {
	case OpGet:
		return 0
	case OpPut:
		return 1
	case OpDelete:
		return 2
	default:
		return 3
	}
}

// draw reports whether an event of probability p happens.
func (s *FaultyStore) draw(p float64) bool {
	if p <= 0 {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rng.Float64() < p
}

// fault chooses the fault of c.
func (s *FaultyStore) fault(c Call) Fault {
	c.N = s.calls[opIndex(c.Op)].Add(1)
	if s.disabled.Load() != 0 || (len(s.f.Kinds) > 0 && !slices.Contains(s.f.Kinds, c.Kind)) {
		return NoFault
	}
	if s.f.Inject != nil {
		if f := s.f.Inject(c); f != NoFault {
			return f
		}
	}
	switch c.Op {
	case OpGet, OpList:
		if s.draw(s.f.ReadFailRate) {
			return Fail
		}
	case OpPut, OpDelete:
		switch {
		case s.draw(s.f.WriteFailRate):
			return Fail
		case s.draw(s.f.LostReplyRate):
			return LostReply
		case c.Op == OpPut && c.Version > 0 && s.draw(s.f.ConflictRate):
			return Conflict
		case s.draw(s.f.ConcurrentWriteRate):
			return ConcurrentWrite
		}
	}
	return NoFault
}

func (s *FaultyStore) injected(op Op, kind, id string) error {
	s.fails.Add(1)
	return fmt.Errorf("%w: %s %s/%s", ErrInjected, op, kind, id)
}

// slow waits for the read delay, if the kind is affected.
func (s *FaultyStore) slow(ctx context.Context, kind string) error {
	if s.f.ReadDelay <= 0 || s.disabled.Load() != 0 || (len(s.f.Kinds) > 0 && !slices.Contains(s.f.Kinds, kind)) {
		return nil
	}
	s.delayed.Add(1)
	t := time.NewTimer(s.f.ReadDelay)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Get reads through the wrapped store, after the read delay, unless the
// call is chosen to fail.
func (s *FaultyStore) Get(ctx context.Context, kind, id string) (store.Record, error) {
	if err := s.slow(ctx, kind); err != nil {
		return store.Record{}, err
	}
	switch s.fault(Call{Op: OpGet, Kind: kind, ID: id}) {
	case Fail, LostReply:
		return store.Record{}, s.injected(OpGet, kind, id)
	}
	return s.s.Get(ctx, kind, id)
}

// List reads through the wrapped store, after the read delay, unless the
// call is chosen to fail.
func (s *FaultyStore) List(ctx context.Context, kind, prefix, after string, limit int) ([]store.Record, error) {
	if err := s.slow(ctx, kind); err != nil {
		return nil, err
	}
	switch s.fault(Call{Op: OpList, Kind: kind, ID: prefix}) {
	case Fail, LostReply:
		return nil, s.injected(OpList, kind, prefix)
	}
	return s.s.List(ctx, kind, prefix, after, limit)
}

// Put writes through the wrapped store, with the fault chosen for the call.
func (s *FaultyStore) Put(ctx context.Context, kind, id string, data []byte, version int64) (int64, error) {
	switch s.fault(Call{Op: OpPut, Kind: kind, ID: id, Version: version}) {
	case Fail:
		return 0, s.injected(OpPut, kind, id)
	case LostReply:
		if _, err := s.s.Put(ctx, kind, id, data, version); err != nil {
			return 0, err
		}
		s.lost.Add(1)
		return 0, fmt.Errorf("%w: put %s/%s: the write landed but its reply was lost", ErrInjected, kind, id)
	case Conflict:
		s.conflicts.Add(1)
		return 0, adapter.ConflictError(kind, id, version)
	case ConcurrentWrite:
		if err := s.writeFirst(ctx, kind, id, data); err != nil {
			return 0, err
		}
	}
	return s.s.Put(ctx, kind, id, data, version)
}

// Delete deletes through the wrapped store, with the fault chosen for the
// call.
func (s *FaultyStore) Delete(ctx context.Context, kind, id string, version int64) error {
	switch s.fault(Call{Op: OpDelete, Kind: kind, ID: id, Version: version}) {
	case Fail:
		return s.injected(OpDelete, kind, id)
	case LostReply:
		if err := s.s.Delete(ctx, kind, id, version); err != nil {
			return err
		}
		s.lost.Add(1)
		return fmt.Errorf("%w: delete %s/%s: the delete landed but its reply was lost", ErrInjected, kind, id)
	case ConcurrentWrite:
		if err := s.writeFirst(ctx, kind, id, nil); err != nil {
			return err
		}
	}
	return s.s.Delete(ctx, kind, id, version)
}

// writeFirst is the other writer of [ConcurrentWrite]: it writes the
// stored record again unchanged, or, when there is none and data is not
// nil, creates it with data. Losing a race meanwhile is fine: someone
// wrote, which is the point.
func (s *FaultyStore) writeFirst(ctx context.Context, kind, id string, data []byte) error {
	rec, err := s.s.Get(ctx, kind, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		if data == nil {
			return nil
		}
		rec.Data = data
	case err != nil:
		return err
	}
	if _, err := s.s.Put(ctx, kind, id, rec.Data, rec.Version); err != nil && !errors.Is(err, store.ErrConflict) {
		return err
	}
	s.concurrent.Add(1)
	return nil
}

// Close closes the wrapped store.
func (s *FaultyStore) Close() error { return s.s.Close() }
