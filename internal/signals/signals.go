package signals

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/calf-go/calf/store"
)

// Kind is the store kind of a signal.
const Kind = "signal"

// MaxNameLen bounds a signal's name.
const MaxNameLen = 128

// Signal is one signal sent to a run.
type Signal struct {
	// ID is the record's id: "{run key}/{name}/{seq}".
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Value json.RawMessage `json:"value,omitempty"`
	// SentAt is when it was sent.
	SentAt time.Time `json:"sent_at"`
}

// CheckName reports whether name can name a signal: 1 to 128 bytes of
// letters, digits, '_', '-', '.' and ':'.
func CheckName(name string) error {
	if name == "" || len(name) > MaxNameLen {
		return fmt.Errorf("a signal's name has 1 to %d bytes, not %d", MaxNameLen, len(name))
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_-.:", r)) {
			return fmt.Errorf("a signal's name is made of letters, digits, '_', '-', '.' and ':'; %q has %q", name, r)
		}
	}
	return nil
}

// NewSeq returns a fresh position for a signal sent at now: the time in
// nanoseconds on 19 digits and a random suffix.
func NewSeq(now time.Time) string {
	return fmt.Sprintf("%019d-%08x", max(now.UnixNano(), 0), rand.Uint32())
}

type seqKey struct{}

// WithSeq returns a context under which [Send] gives the signal it
// records the position seq (from [NewSeq]) instead of a fresh one: a
// signal sent again under the same seq is the one recorded the first
// time, not a second. A caller's idempotency key keeps the seq of its
// first request.
func WithSeq(ctx context.Context, seq string) context.Context {
	return context.WithValue(ctx, seqKey{}, seq)
}

// Send records the signal name with value for the run of key, at now,
// and returns it. Under [WithSeq], a signal of that position sent before
// is returned as it was recorded.
func Send(ctx context.Context, s store.Store, key, name string, value json.RawMessage, now time.Time) (*Signal, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	if len(value) > 0 && !json.Valid(value) {
		return nil, fmt.Errorf("the value of signal %s is not JSON", name)
	}
	seq, given := ctx.Value(seqKey{}).(string)
	if !given || seq == "" {
		seq = NewSeq(now)
	}
	sig := &Signal{ID: key + "/" + name + "/" + seq, Name: name, Value: value, SentAt: now.UTC()}
	data, err := json.Marshal(sig)
	if err != nil {
		return nil, err
	}
	if _, err := s.Put(ctx, Kind, sig.ID, data, 0); err != nil {
		if given && errors.Is(err, store.ErrConflict) {
			return Get(ctx, s, sig.ID) // sent before under this seq
		}
		return nil, err
	}
	return sig, nil
}

// Next returns the first signal name of the run of key after the signal
// id after ("" for the first), or false when none was sent.
func Next(ctx context.Context, s store.Store, key, name, after string) (*Signal, bool, error) {
	prefix := key + "/" + name + "/"
	if after != "" && !strings.HasPrefix(after, prefix) {
		return nil, false, fmt.Errorf("signals: %q is not a signal %s of %s", after, name, key)
	}
	recs, err := s.List(ctx, Kind, prefix, after, 1)
	if err != nil || len(recs) == 0 {
		return nil, false, err
	}
	sig, err := decode(recs[0])
	return sig, err == nil, err
}

// Get returns the signal id.
func Get(ctx context.Context, s store.Store, id string) (*Signal, error) {
	rec, err := s.Get(ctx, Kind, id)
	if err != nil {
		return nil, err
	}
	return decode(rec)
}

func decode(r store.Record) (*Signal, error) {
	var sig Signal
	if err := json.Unmarshal(r.Data, &sig); err != nil {
		return nil, fmt.Errorf("signals: signal %s: %w", r.ID, err)
	}
	return &sig, nil
}

// Seq returns the position of the signal id among those of its name, for
// event ids: what follows its last '/'.
func Seq(id string) string { return id[strings.LastIndexByte(id, '/')+1:] }

// Sweep removes the signals of the run whose key is key, and the records
// of its waits, and returns how many records it removed.
func Sweep(ctx context.Context, s store.Store, key string) (int, error) {
	n := 0
	for _, kind := range []string{Kind, KindCall, KindWaiter, KindCursor, KindWoken} {
		m, err := store.DeletePrefix(ctx, s, kind, key+"/")
		n += m
		if err != nil {
			return n, fmt.Errorf("signals: sweep %s: %w", key, err)
		}
	}
	return n, nil
}
