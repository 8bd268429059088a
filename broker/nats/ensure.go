package nats

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/calf-go/calf"
)

// The JetStream requests that create the broker's stream and its bucket
// of leases are made so that processes starting together on a cluster
// all get them: each looks the stream up first and creates it only when
// it is missing, updates it only when its configuration differs from the
// one wanted, and waits until it has a leader. A request racing another
// process's (on a cluster, an update of a stream whose creation is still
// being replicated is never answered, nor is that creation) is bounded by
// apiAttempt and made again, after looking again, until the caller's
// context ends.
const (
	// apiAttempt bounds one attempt of such a request.
	apiAttempt = 2 * time.Second
	// openTimeout bounds the whole when the caller's context has no
	// deadline.
	openTimeout = 30 * time.Second
)

// errNoLeader reports a stream that exists but has no leader yet.
var errNoLeader = errors.New("no leader yet")

// settle runs step until it succeeds, each attempt bounded by attempt,
// and again after a backoff while it fails for a reason that passes
// (see settles), until ctx ends; without a deadline, ctx is bounded by
// openTimeout.
func settle(ctx context.Context, attempt time.Duration, step func(context.Context) error) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, openTimeout)
		defer cancel()
	}
	backoff := calf.ExponentialBackoff(50*time.Millisecond, time.Second)
	for try := 1; ; try++ {
		actx, cancel := context.WithTimeout(ctx, attempt)
		err := step(actx)
		cancel()
		if err == nil || !settles(err) || ctx.Err() != nil {
			return err
		}
		t := time.NewTimer(backoff(try))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return err
		}
	}
}

// settles reports whether a request that failed with err may succeed if
// made again soon: the server did not answer in time or is electing a
// leader, or another process created or deleted the stream meanwhile.
func settles(err error) bool {
	return publishOutage(err) || errors.Is(err, errNoLeader) ||
		errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) || errors.Is(err, jetstream.ErrBucketExists) ||
		errors.Is(err, jetstream.ErrStreamNotFound) || errors.Is(err, jetstream.ErrConsumerExists)
}

// ensureStream returns the stream cfg describes, once it has a leader:
// looked up, created if missing, updated if its configuration differs
// from cfg in what cfg sets.
func ensureStream(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	var st jetstream.Stream
	err := settle(ctx, apiAttempt, func(ctx context.Context) error {
		var err error
		st, err = js.Stream(ctx, cfg.Name)
		switch {
		case errors.Is(err, jetstream.ErrStreamNotFound):
			st, err = js.CreateStream(ctx, cfg)
		case err == nil && !sameStream(st.CachedInfo().Config, cfg):
			st, err = js.UpdateStream(ctx, cfg)
		}
		if err != nil {
			return err
		}
		return led(st.CachedInfo())
	})
	if err != nil {
		return nil, fmt.Errorf("nats: stream %s: %w", cfg.Name, err)
	}
	return st, nil
}

// sameStream reports whether the stream configuration have is want in
// what the broker sets.
func sameStream(have, want jetstream.StreamConfig) bool {
	return slices.Equal(have.Subjects, want.Subjects) && have.Description == want.Description &&
		have.Retention == want.Retention && have.Storage == want.Storage && have.Replicas == want.Replicas &&
		have.MaxAge == want.MaxAge && have.MaxBytes == want.MaxBytes && have.Duplicates == want.Duplicates
}

// led returns errNoLeader when the stream of info has no leader yet.
func led(info *jetstream.StreamInfo) error {
	if info.Cluster != nil && info.Cluster.Leader == "" {
		return errNoLeader
	}
	return nil
}

// ensureBucket returns the key-value bucket cfg describes, once its
// stream has a leader: looked up, created if missing, updated if its
// history, TTL or replicas differ from cfg's.
func ensureBucket(ctx context.Context, js jetstream.JetStream, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	var kv jetstream.KeyValue
	err := settle(ctx, apiAttempt, func(ctx context.Context) error {
		st, err := js.Stream(ctx, "KV_"+cfg.Bucket)
		switch {
		case errors.Is(err, jetstream.ErrStreamNotFound):
			if _, err = js.CreateKeyValue(ctx, cfg); err == nil {
				st, err = js.Stream(ctx, "KV_"+cfg.Bucket)
			}
		case err == nil && !sameBucket(st.CachedInfo().Config, cfg):
			if _, err = js.UpdateKeyValue(ctx, cfg); err == nil {
				st, err = js.Stream(ctx, "KV_"+cfg.Bucket)
			}
		}
		if err != nil {
			return err
		}
		if err := led(st.CachedInfo()); err != nil {
			return err
		}
		kv, err = js.KeyValue(ctx, cfg.Bucket)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("nats: bucket %s: %w", cfg.Bucket, err)
	}
	return kv, nil
}

// sameBucket reports whether the stream configuration have is that of the
// bucket want in what the broker sets.
func sameBucket(have jetstream.StreamConfig, want jetstream.KeyValueConfig) bool {
	return have.MaxAge == want.TTL && have.Replicas == max(want.Replicas, 1) &&
		have.MaxMsgsPerSubject == int64(max(want.History, 1)) && have.Description == want.Description
}
