package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/store"
)

// KindClaim is the kind of the records by which a process says that it
// has a tool call or a model call of a run in hand (claims).
const KindClaim = "call_claim"

// Claims keep a tool call or a model call from being made by a second
// process while the first one that took it is alive, on a broker that may
// deliver a message to another process while the first still handles it
// (its partition's lease lost under load, then taken by another member).
//
// Before it calls, a delivery claims the call: it creates the call's
// claim record (kind call_claim, id run/tool/CALL or run/step/N) naming
// its process, and renews it every claimRenew while it calls and records
// the outcome. A delivery in another process that finds the claim waits:
// until the outcome is recorded (done), which it then uses, or until it
// has seen the claim go unrenewed for claimTTL while it could read the
// store, which says that its holder died (or cannot reach the store): it
// then takes the claim over and makes the call itself. The wait is timed
// by the waiting process's own clock, from versions it reads, so clocks
// need not agree, and an outage of the store counts for no one.
//
// A claim that the process holding it gives up because it stops is
// removed, so that another takes the call at once. Claims are removed with
// their run's other records (agent.Runtime.Sweep). On a local broker every delivery
// is in this process, whose flights suffice: there are no claims.
type Claims struct {
	store  store.Store
	holder string // this process's name in its claims
	now    func() time.Time
}

// claimTTL is how long a claim may go unrenewed, as another process sees
// it, before that process takes it over; claimRenew how often its holder
// renews it; claimPoll how often a waiting delivery looks again.
const (
	claimTTL   = 3 * time.Second
	claimRenew = time.Second
	claimPoll  = 250 * time.Millisecond
)

// claimRecord is a claim's record.
type claimRecord struct {
	Holder string `json:"holder"`
	// Renewals counts the renewals: each changes the record, and its
	// version, which is what the waiting see.
	Renewals int `json:"renewals,omitempty"`
}

// NewClaims returns the claims of a process whose agents use broker b
// and store st, timed by now; nil on a local broker.
func NewClaims(b calf.Broker, st store.Store, now func() time.Time) *Claims {
	if calf.IsLocal(b) {
		return nil
	}
	var id [8]byte
	_, _ = rand.Read(id[:])
	return &Claims{store: st, holder: hex.EncodeToString(id[:]), now: now}
}

// ClaimToolKey is the key of the claim of a run's tool call.
func ClaimToolKey(run, call string) string { return run + "/tool/" + call }

// ClaimStepKey is the key of the claim of the model call of a run's step.
func ClaimStepKey(run string, step int) string {
	return run + "/step/" + strconv.Itoa(step)
}

// A HeldClaim is a claim this process holds, renewed until released.
type HeldClaim struct {
	c       *Claims
	key     string
	version int64 // the claim's stored version, the renewals' to change
	stop    chan struct{}
	done    chan struct{}
}

// Take claims the call key, waiting while another live process holds it.
// done reports whether the call's outcome is recorded: when it is, Take
// returns finished true and no claim. A nil *Claims takes nothing.
func (c *Claims) Take(ctx context.Context, key string, done func(context.Context) (bool, error)) (held *HeldClaim, finished bool, err error) {
	if c == nil {
		return nil, false, nil
	}
	mine, _ := json.Marshal(claimRecord{Holder: c.holder})
	var seen int64 = -1 // the version last seen of another's claim
	var since time.Time // since when it has been seen unchanged
	for {
		v, err := c.store.Put(ctx, KindClaim, key, mine, 0)
		if err == nil {
			return c.hold(key, v), false, nil
		}
		if !errors.Is(err, store.ErrConflict) {
			return nil, false, err
		}
		rec, err := c.store.Get(ctx, KindClaim, key)
		if errors.Is(err, store.ErrNotFound) {
			continue // removed meanwhile
		}
		if err != nil {
			return nil, false, err
		}
		var cr claimRecord
		_ = json.Unmarshal(rec.Data, &cr) // a record that does not decode is no one's
		now := c.now()
		switch {
		case cr.Holder == c.holder:
			// This process's, left by an earlier delivery: the flight
			// it holds says that no other delivery here acts on it.
		case rec.Version != seen:
			seen, since = rec.Version, now
			fallthrough
		case now.Sub(since) < claimTTL:
			if ok, err := done(ctx); err != nil || ok {
				return nil, ok, err
			}
			t := time.NewTimer(claimPoll)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return nil, false, context.Cause(ctx)
			}
			continue
		}
		// Taken over: the holder is gone, or it is this process.
		v, err = c.store.Put(ctx, KindClaim, key, mine, rec.Version)
		if errors.Is(err, store.ErrConflict) {
			continue
		}
		if err != nil {
			return nil, false, err
		}
		return c.hold(key, v), false, nil
	}
}

// hold renews the claim key, stored at version, until it is released.
func (c *Claims) hold(key string, version int64) *HeldClaim {
	h := &HeldClaim{c: c, key: key, version: version, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(h.done)
		t := time.NewTicker(claimRenew)
		defer t.Stop()
		for n := 1; ; n++ {
			select {
			case <-h.stop:
				return
			case <-t.C:
			}
			data, _ := json.Marshal(claimRecord{Holder: c.holder, Renewals: n})
			ctx, cancel := context.WithTimeout(context.Background(), claimRenew)
			v, err := c.store.Put(ctx, KindClaim, key, data, h.version)
			cancel()
			switch {
			case err == nil:
				h.version = v
			case errors.Is(err, store.ErrConflict), errors.Is(err, store.ErrNotFound):
				return // taken over, or swept with its run: nothing to renew
			}
		}
	}()
	return h
}

// Release stops renewing the claim. When ctx has ended (the process
// stops), the claim is removed, so that another process takes the call at
// once. A nil *HeldClaim releases nothing.
func (h *HeldClaim) Release(ctx context.Context) {
	if h == nil {
		return
	}
	select {
	case <-h.stop:
		return // released already
	default:
	}
	close(h.stop)
	<-h.done
	if ctx.Err() != nil {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = h.c.store.Delete(dctx, KindClaim, h.key, h.version)
	}
}
