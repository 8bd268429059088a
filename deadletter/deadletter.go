package deadletter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/internal/sweep"
	"github.com/calf-go/calf/store"
)

// RecorderGroup is the consumer group of the recorder [Serve] subscribes.
const RecorderGroup = "calf.deadletter.recorder"

// ErrNotFound is returned (wrapped) for an id that names no recorded dead
// letter. It also matches [store.ErrNotFound].
var ErrNotFound = store.NotFound("deadletter: no such dead letter")

// Record is a dead letter as kept in the store.
type Record struct {
	// ID identifies the record: the id of the message that carried the dead
	// letter on [calf.DeadLetterChannel].
	ID string `json:"id"`
	calf.DeadLetter
	// ReplayedAt is when the message was last republished by [Replay]; zero
	// if never.
	ReplayedAt time.Time `json:"replayed_at,omitzero"`
	// ReplayID is the id of the republished message.
	ReplayID string `json:"replay_id,omitempty"`
}

// Replayed reports whether the record was replayed.
func (r *Record) Replayed() bool { return !r.ReplayedAt.IsZero() }

// record writes the dead letter msg in s, and its index entry.
func record(ctx context.Context, s store.Store, msg *calf.Message) error {
	rec := Record{ID: msg.ID}
	if err := json.Unmarshal(msg.Data, &rec.DeadLetter); err != nil || rec.Message == nil {
		rec.DeadLetter = calf.DeadLetter{
			Message: &calf.Message{ID: msg.Metadata.CausationID, Key: msg.Key},
			RawData: msg.Data,
			Error:   "deadletter: the dead letter's payload is not a calf.DeadLetter",
			Time:    msg.Metadata.Time,
		}
	}
	data, err := json.Marshal(rec)
	if err != nil {
		return calf.Permanent(fmt.Errorf("deadletter: encode %s: %w", msg.ID, err))
	}
	if _, err := store.Claim(ctx, s, store.KindDeadLetter, msg.ID, data); err != nil {
		return fmt.Errorf("deadletter: record %s: %w", msg.ID, err)
	}
	return index(ctx, s, msg)
}

// runEntry is a record of the index of dead letters by correlation id.
type runEntry struct {
	CorrelationID string `json:"correlation_id"`
	DeadLetter    string `json:"dead_letter"`
}

// index records the dead letter msg under the correlation id of the
// message parked, for [OfRun]. A message without one, or whose index key
// would be too long, is not indexed.
func index(ctx context.Context, s store.Store, msg *calf.Message) error {
	corr := msg.Metadata.CorrelationID
	id := corr + "/" + msg.ID
	if corr == "" || len(id) > store.MaxKeyLen {
		return nil
	}
	data, err := json.Marshal(runEntry{CorrelationID: corr, DeadLetter: msg.ID})
	if err != nil {
		return calf.Permanent(fmt.Errorf("deadletter: encode the index of %s: %w", msg.ID, err))
	}
	if _, err := store.Claim(ctx, s, store.KindDeadLetterRun, id, data); err != nil {
		return fmt.Errorf("deadletter: index %s: %w", msg.ID, err)
	}
	return nil
}

// OfRun returns the recorded dead letters, not yet replayed, of the
// messages whose correlation id is runID or derived from it (a run's own
// messages, and those of the runs it started, whose ids extend runID
// after a '.' or a '/'). Only what a recorder ([Serve]) recorded is
// known.
func OfRun(ctx context.Context, s store.Store, runID string) ([]*Record, error) {
	if runID == "" {
		return nil, nil
	}
	var out []*Record
	err := each(ctx, s, store.KindDeadLetterRun, runID, func(r store.Record) error {
		var e runEntry
		if err := json.Unmarshal(r.Data, &e); err != nil {
			return fmt.Errorf("deadletter: decode index record %s: %w", r.ID, err)
		}
		if c := e.CorrelationID; c != runID && !strings.HasPrefix(c, runID+".") && !strings.HasPrefix(c, runID+"/") {
			return nil // another run whose id starts with runID
		}
		rec, err := Get(ctx, s, e.DeadLetter)
		switch {
		case errors.Is(err, ErrNotFound):
		case err != nil:
			return err
		case !rec.Replayed():
			out = append(out, rec)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Letter returns the message that carried r on [calf.DeadLetterChannel],
// as the recorder received it: what agent.ParkedError reads.
func (r *Record) Letter() *calf.Message {
	data, _ := json.Marshal(r.DeadLetter) // a DeadLetter always marshals
	m := &calf.Message{ID: r.ID, Channel: calf.DeadLetterChannel, Data: data}
	if r.DeadLetter.Message != nil {
		m.Key = r.DeadLetter.Message.Key
	}
	return m
}

// Serve subscribes a [Recorder] of s on c, in [RecorderGroup], logging to
// the client's logger. The subscription lasts until the client shuts down.
func Serve(ctx context.Context, c *calf.Client, s store.Store) error {
	rec := NewRecorder(s, &RecorderOptions{Logger: c.Logger()})
	if err := c.Handle(ctx, calf.DeadLetterChannel, rec.Handle, &calf.SubscribeOptions{Group: RecorderGroup}); err != nil {
		return fmt.Errorf("deadletter: serve: %w", err)
	}
	return nil
}

// Get returns the record with id, or an error matching [ErrNotFound].
func Get(ctx context.Context, s store.Store, id string) (*Record, error) {
	if id == "" {
		return nil, fmt.Errorf("%w: empty id", ErrNotFound)
	}
	r, err := s.Get(ctx, store.KindDeadLetter, id)
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrInvalidKey) {
		return nil, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	if err != nil {
		return nil, fmt.Errorf("deadletter: get %s: %w", id, err)
	}
	return decode(r)
}

func decode(r store.Record) (*Record, error) {
	var rec Record
	if err := json.Unmarshal(r.Data, &rec); err != nil {
		return nil, fmt.Errorf("deadletter: decode %s: %w", r.ID, err)
	}
	rec.ID = r.ID
	return &rec, nil
}

// listPage is how many records List reads at a time.
const listPage = 500

// List returns every recorded dead letter, ordered by id.
func List(ctx context.Context, s store.Store) ([]*Record, error) {
	var out []*Record
	err := each(ctx, s, store.KindDeadLetter, "", func(r store.Record) error {
		rec, err := decode(r)
		if err == nil {
			out = append(out, rec)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// each calls fn for every record of kind whose id starts with prefix, in
// id order, reading them listPage at a time.
func each(ctx context.Context, s store.Store, kind, prefix string, fn func(store.Record) error) error {
	after := ""
	for {
		page, err := s.List(ctx, kind, prefix, after, listPage)
		if err != nil {
			return fmt.Errorf("deadletter: list %s: %w", kind, err)
		}
		for _, r := range page {
			if err := fn(r); err != nil {
				return err
			}
		}
		if len(page) < listPage {
			return nil
		}
		after = page[len(page)-1].ID
	}
}

// ReplayMessage returns the message [Replay] publishes for rec: the
// original message, with its original bytes, attempt 0, and the id
// ReplayID(rec).
func ReplayMessage(rec *Record) (*calf.Message, error) {
	if rec.Message == nil || rec.Message.Channel == "" {
		return nil, fmt.Errorf("deadletter: %s holds no message to replay", rec.ID)
	}
	m := rec.Message.Clone()
	if len(rec.RawData) > 0 {
		m.Data = json.RawMessage(rec.RawData)
	}
	m.ID = ReplayID(rec)
	m.Metadata.Attempt = 0
	return m, nil
}

// ReplayID returns the id a replay of rec publishes under. It is derived
// from the original id, so that a replay retried after a failure
// publishes the same message again, which brokers that deduplicate by id
// drop and idempotent handlers ignore.
func ReplayID(rec *Record) string {
	return rec.Message.ID + ".replay"
}

// Replay republishes the message of the dead letter id on b, on its
// original channel, and marks the record replayed. It returns the record
// and whether this call published it: a record already replayed is
// returned as it is, without publishing. An unknown id returns an error
// matching [ErrNotFound].
func Replay(ctx context.Context, b calf.Broker, s store.Store, id string, now time.Time) (*Record, bool, error) {
	rec, err := Get(ctx, s, id)
	if err != nil {
		return nil, false, err
	}
	if rec.Replayed() {
		return rec, false, nil
	}
	m, err := ReplayMessage(rec)
	if err != nil {
		return nil, false, err
	}
	if err := b.Publish(ctx, m); err != nil {
		return nil, false, fmt.Errorf("deadletter: replay %s: %w", id, err)
	}
	var out *Record
	published := true
	_, err = store.Update(ctx, s, store.KindDeadLetter, id, func(data []byte, exists bool) ([]byte, error) {
		if !exists {
			return nil, fmt.Errorf("%w: %q (deleted during the replay)", ErrNotFound, id)
		}
		cur, err := decode(store.Record{ID: id, Data: data})
		if err != nil {
			return nil, err
		}
		out = cur
		if cur.Replayed() {
			published = false // another replay marked it first
			return nil, nil
		}
		cur.ReplayedAt, cur.ReplayID = now, m.ID
		return json.Marshal(cur)
	})
	if err != nil {
		return nil, false, fmt.Errorf("deadletter: mark %s replayed: %w", id, err)
	}
	return out, published, nil
}

// Sweep removes the dead letters that were replayed before before, with
// their index entries; it is an store.Sweeper, which a Worker that
// records dead letters registers. A dead letter never replayed is kept:
// its run waits for it.
func Sweep(ctx context.Context, s store.Store, before time.Time) (runs, records int, err error) {
	return sweep.Ended(ctx, s, store.KindDeadLetter, before, 0, func(data []byte) (time.Time, bool) {
		var r Record
		if json.Unmarshal(data, &r) != nil {
			return time.Time{}, false
		}
		return r.ReplayedAt, r.Replayed()
	}, func(rec store.Record) (int, error) {
		var r Record
		if err := json.Unmarshal(rec.Data, &r); err != nil || r.Message == nil || r.Message.Metadata.CorrelationID == "" {
			return 0, nil
		}
		id := r.Message.Metadata.CorrelationID + "/" + rec.ID
		if len(id) > store.MaxKeyLen {
			return 0, nil
		}
		if err := s.Delete(ctx, store.KindDeadLetterRun, id, 0); err != nil {
			return 0, err
		}
		return 1, nil
	})
}
