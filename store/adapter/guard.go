package adapter

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/store"
)

// CheckKey validates a kind and an id. Adapters call it first in every
// method.
func CheckKey(kind, id string) error {
	if kind == "" || id == "" || len(kind) > store.MaxKeyLen || len(id) > store.MaxKeyLen {
		return fmt.Errorf("%w: kind %q id %q", store.ErrInvalidKey, kind, truncate(id))
	}
	return nil
}

// Guard is what a store adapter keeps to refuse work once it is closed,
// with the checks every adapter makes around an operation. The zero value
// is open.
type Guard struct {
	// Name starts the errors of Fail, such as "postgres".
	Name string
	// Unavailable, when set, reports whether an error of the database
	// shows that it cannot be reached for now (down, restarting, failing
	// over, out of connections): Fail marks such errors with
	// [calf.Unavailable], so that brokers retry their handlers through
	// the outage instead of parking their messages.
	Unavailable func(error) bool
	closed      atomic.Bool
}

// Close marks the store closed.
func (g *Guard) Close() { g.closed.Store(true) }

// Closed reports whether Close was called.
func (g *Guard) Closed() bool { return g.closed.Load() }

// Check validates the key with [CheckKey], then returns what Live
// returns. Adapters call it first in every method that takes a key.
func (g *Guard) Check(ctx context.Context, kind, id string) error {
	if err := CheckKey(kind, id); err != nil {
		return err
	}
	return g.Live(ctx)
}

// Live returns [store.ErrClosed] once the store is closed, and otherwise ctx's
// error.
func (g *Guard) Live(ctx context.Context) error {
	if g.closed.Load() {
		return store.ErrClosed
	}
	return ctx.Err()
}

// Fail wraps err, which the database returned for operation op. A close
// or a done ctx that happened during the operation is reported as such
// ([store.ErrClosed], ctx's error) rather than as what the database made of it;
// an error of a database that cannot be reached ([Guard.Unavailable],
// or [calf.IsUnavailable]) matches [calf.ErrUnavailable].
func (g *Guard) Fail(ctx context.Context, op string, err error) error {
	switch {
	case g.closed.Load():
		err = store.ErrClosed
	case ctx.Err() != nil:
		err = ctx.Err()
	case calf.IsUnavailable(err) || g.Unavailable != nil && g.Unavailable(err):
		return calf.Unavailable(fmt.Errorf("%s: %s: %w", g.Name, op, err))
	}
	return fmt.Errorf("%s: %s: %w", g.Name, op, err)
}

// CheckKind validates a kind alone, for methods such as List that take no
// id. Adapters call it first in List.
func CheckKind(kind string) error {
	if kind == "" || len(kind) > store.MaxKeyLen {
		return fmt.Errorf("%w: kind %q", store.ErrInvalidKey, truncate(kind))
	}
	return nil
}

func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// ConflictError returns the error an adapter reports when a write's
// expected version is not the stored one. It matches [store.ErrConflict].
func ConflictError(kind, id string, version int64) error {
	return fmt.Errorf("%w: %s/%s: version %d is not the stored one", store.ErrConflict, kind, id, version)
}
