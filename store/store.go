package store

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// Errors of the store contract. Adapters return them (possibly wrapped) so
// that callers can test with errors.Is.
var (
	// ErrNotFound is returned when no record has the kind and id.
	ErrNotFound = errors.New("store: not found")
	// ErrConflict is returned when a write's expected version is not the
	// stored one: someone else wrote first.
	ErrConflict = errors.New("store: version conflict")
	// ErrClosed is returned after Close.
	ErrClosed = errors.New("store: closed")
	// ErrInvalidKey is returned for an empty kind or id, or one that is too long.
	ErrInvalidKey = errors.New("store: invalid key")
)

// NotFound returns a sentinel error with the text msg that matches
// [ErrNotFound] with errors.Is, for a package whose own not-found error
// (an approval request, a dead letter, a conversation) should also be
// what every store's is: one test for "not found" across packages, and
// one HTTP status for it. Two calls return distinct errors.
func NotFound(msg string) error { return &notFoundError{msg} }

type notFoundError struct{ msg string }

func (e *notFoundError) Error() string { return e.msg }

// Is reports whether target is [ErrNotFound].
func (e *notFoundError) Is(target error) bool { return target == ErrNotFound }

// Kinds of records Calf itself keeps.
const (
	KindRun        = "run"         // one agent run's state
	KindSession    = "session"     // a conversation's history
	KindToolResult = "tool_result" // the recorded result of one tool call
	KindProcessed  = "processed"   // an idempotency record
	KindCheckpoint = "checkpoint"  // a workflow checkpoint
	KindWorkflow   = "workflow"    // one workflow run's position and state
	KindTeam       = "team"        // one team run's state
	KindDeadLetter = "dead_letter" // a message parked on the dead-letter channel
	// KindDeadLetterRun indexes the dead letters by the correlation id of
	// the message parked: {correlation id}/{dead letter id}.
	KindDeadLetterRun = "dead_letter_run"
)

// MaxKeyLen bounds the length of a kind and of an id.
const MaxKeyLen = 512

// Record is one stored record.
type Record struct {
	Kind    string
	ID      string
	Version int64 // 1 for a new record, incremented by each write
	Data    []byte
	// UpdatedAt is when the record was last written.
	UpdatedAt time.Time
}

// Store is the contract every state-store adapter implements. All methods
// are safe for concurrent use.
type Store interface {
	// Get returns the record, or [ErrNotFound].
	Get(ctx context.Context, kind, id string) (Record, error)
	// Put writes data if the record's stored version is version, and
	// returns the new version. Version 0 means the record must not exist
	// yet. A mismatch returns [ErrConflict] and writes nothing.
	Put(ctx context.Context, kind, id string, data []byte, version int64) (int64, error)
	// Delete removes the record if its stored version is version; version 0
	// removes it whatever its version. Deleting a missing record is not an
	// error.
	Delete(ctx context.Context, kind, id string, version int64) error
	// List returns the records of kind whose id starts with prefix, ordered
	// by id, at most limit of them (0 means no limit), starting after the id
	// after (empty: from the start).
	List(ctx context.Context, kind, prefix, after string, limit int) ([]Record, error)
	// Close releases the store's resources.
	Close() error
}

// Claim records that the operation named by kind and id has happened, and
// reports whether this call was the first to do so. It is the idempotency
// record: a second Claim of the same key returns false.
func Claim(ctx context.Context, s Store, kind, id string, data []byte) (bool, error) {
	_, err := s.Put(ctx, kind, id, data, 0)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, ErrConflict):
		return false, nil
	default:
		return false, err
	}
}

// MaxUpdateAttempts bounds the compare-and-swap retries of [Update].
const MaxUpdateAttempts = 32

// Update applies fn to the record's current data (nil and exists=false when
// there is none) and writes the result with a compare-and-swap, retrying
// from a fresh read on conflict, after a short random pause that grows
// with each conflict (so that writers contending for one record take turns
// instead of starving one another). When fn returns a nil slice and a nil
// error, nothing is written and Update returns the current record. An error
// from fn is returned as is.
func Update(ctx context.Context, s Store, kind, id string, fn func(data []byte, exists bool) ([]byte, error)) (Record, error) {
	for attempt := range MaxUpdateAttempts {
		if attempt > 0 {
			if err := conflictPause(ctx, attempt); err != nil {
				return Record{}, err
			}
		}
		rec, err := s.Get(ctx, kind, id)
		exists := err == nil
		if err != nil && !errors.Is(err, ErrNotFound) {
			return Record{}, err
		}
		next, err := fn(rec.Data, exists)
		if err != nil {
			return rec, err
		}
		if next == nil {
			return rec, nil
		}
		v, err := s.Put(ctx, kind, id, next, rec.Version)
		if errors.Is(err, ErrConflict) {
			continue
		}
		if err != nil {
			return rec, err
		}
		return Record{Kind: kind, ID: id, Version: v, Data: next}, nil
	}
	return Record{}, fmt.Errorf("%w: %s/%s: gave up after %d attempts", ErrConflict, kind, id, MaxUpdateAttempts)
}

// CreateOrUpdate is [Update] for a record that usually does not exist
// yet: it first applies fn to no data (exists=false) and writes the result
// create-only, without reading the record, which saves a read (a query,
// on a database) when the record is new. When the record exists (the
// write conflicts), or fn returns a nil slice, it goes on as Update, which
// applies fn again to the stored data.
func CreateOrUpdate(ctx context.Context, s Store, kind, id string, fn func(data []byte, exists bool) ([]byte, error)) (Record, error) {
	data, err := fn(nil, false)
	if err != nil {
		return Record{}, err
	}
	if data != nil {
		v, err := s.Put(ctx, kind, id, data, 0)
		if err == nil {
			return Record{Kind: kind, ID: id, Version: v, Data: data}, nil
		}
		if !errors.Is(err, ErrConflict) {
			return Record{}, err
		}
	}
	return Update(ctx, s, kind, id, fn)
}

// UpdateFrom is [Update] for a caller that holds a recent copy of the
// record, known (such as one it read or wrote a moment ago and kept): it
// first applies fn to known's data and writes the result with a
// compare-and-swap at known's version, without reading the record, which
// saves a read when the copy is current. When the write conflicts (the
// record changed since), or fn returns a nil slice (nothing to write, as
// far as the copy shows), it goes on as Update, which applies fn again to
// the stored data. A stored record at known's version holds known's data
// as long as the record is not deleted and created again: versions start
// over at 1 on a new record, so a copy of a record that may be deleted and
// recreated is not safe to pass.
func UpdateFrom(ctx context.Context, s Store, known Record, fn func(data []byte, exists bool) ([]byte, error)) (Record, error) {
	if known.Version > 0 {
		next, err := fn(known.Data, true)
		if err != nil {
			return Record{}, err
		}
		if next != nil {
			v, err := s.Put(ctx, known.Kind, known.ID, next, known.Version)
			if err == nil {
				return Record{Kind: known.Kind, ID: known.ID, Version: v, Data: next}, nil
			}
			if !errors.Is(err, ErrConflict) {
				return Record{}, err
			}
		}
	}
	return Update(ctx, s, known.Kind, known.ID, fn)
}

// conflictPause waits a random time up to 100 µs doubled per conflict
// already met (at most 25 ms), or until ctx ends.
func conflictPause(ctx context.Context, conflicts int) error {
	limit := min(100*time.Microsecond<<min(conflicts-1, 8), 25*time.Millisecond)
	t := time.NewTimer(rand.N(limit) + 1)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
