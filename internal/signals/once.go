package signals

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/calf-go/calf/store"
)

// Reserved begins the names of the signals that Calf sends itself: an
// approval request's answer ([ApprovalName]), a workflow interrupt's. A
// caller cannot send them ([CheckSent]): an answer goes through its own
// API, which checks who may give it and records it.
const Reserved = "calf."

// CheckSent reports whether a caller may send a signal of the name: one
// [CheckName] accepts that does not begin with [Reserved].
func CheckSent(name string) error {
	if err := CheckName(name); err != nil {
		return err
	}
	if strings.HasPrefix(name, Reserved) {
		return fmt.Errorf("signal names beginning with %q are Calf's own (approval answers, workflow interrupts), answered through their own API: %q", Reserved, name)
	}
	return nil
}

// Key names a run among the runs whose signals are kept:
// "{kind}/{runner}/{run}", as in "agent/triage/r1" or
// "workflow/review/r2".
func Key(kind, runner, run string) string { return kind + "/" + runner + "/" + run }

// ApprovalName is the name of the signal that answers the approval
// request of the call id: "calf.approval.{id}", or, for an id that cannot
// be part of a name, "calf.approval.h" and a digest of it.
func ApprovalName(call string) string {
	name := Reserved + "approval." + call
	if CheckName(name) != nil {
		sum := sha256.Sum256([]byte(call))
		name = Reserved + "approval.h" + hex.EncodeToString(sum[:16])
	}
	return name
}

// Await registers w as the wake of the one signal name of the run of
// key: a wait that one signal ends for good (an approval request, a
// workflow's interrupt), whose answer its code records itself, so that
// it needs no record of its own (see [Wait] for waits by code that runs
// again). Registered again, it changes nothing. A signal of the name sent
// before is woken at once. The wait is over when [Answered] removes it.
func Await(ctx context.Context, env Env, key, name string, w Wake) error {
	if err := CheckName(name); err != nil {
		return err
	}
	data, err := json.Marshal(w)
	if err != nil {
		return err
	}
	if _, err := env.Store.Put(ctx, KindWaiter, key+"/"+name, data, 0); err != nil && !errors.Is(err, store.ErrConflict) {
		return fmt.Errorf("wait for signal %s: %w", name, err)
	}
	// A signal sent before the waiter was recorded found none.
	sig, ok, err := Next(ctx, env.Store, key, name, "")
	if err != nil || !ok {
		return err
	}
	return wake(ctx, env.Client, w, sig)
}

// Answered removes the wait of the signal name of the run of key that
// [Await] registered: its signal has been carried out.
func Answered(ctx context.Context, env Env, key, name string) error {
	if err := env.Store.Delete(ctx, KindWaiter, key+"/"+name, 0); err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	return nil
}

// Answer sends the signal name that ends a wait [Await] registers, with
// value, under the position seq ([NewSeq]; the same each time the same
// answer is sent, so that it is recorded once), and wakes the wait if it
// is registered, reporting whether it was. A caller whose wait is not
// registered (a request recorded before waits were) carries the answer
// out its own way; one registered later finds the signal itself.
func Answer(ctx context.Context, env Env, key, name, seq string, value json.RawMessage) (woke bool, err error) {
	sig, err := Send(WithSeq(ctx, seq), env.Store, key, name, value, env.Now())
	if err != nil {
		return false, err
	}
	return wakeWaiter(ctx, env, key, name, sig)
}
