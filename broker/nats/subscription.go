package nats

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/calf-go/calf"
)

// deliverMargin is how many deliveries beyond its MaxAttempts a consumer
// allows, as a safety net for messages the broker failed to park.
const deliverMargin = 5

// pullExpiry is how long a pull request of a subscription waits at the
// server. Older servers may hand a message to a pull request of a member
// that has closed, and redeliver it only after the ack wait: a short
// expiry bounds how long a closed member leaves such requests behind.
const pullExpiry = 5 * time.Second

// Subscribe delivers the messages whose channel matches pattern to h, as a
// member of the consumer group opts.Group (a private group when empty). A
// named group is a set of durable consumers, one per partition, shared by
// every member in every process and resumed where it left off; a private
// group's consumers start at the messages published after Subscribe
// returns and are deleted when the subscription closes. Subscribe fails
// with [ErrGroupPattern] when the group exists with another pattern and
// with [calf.ErrClosed] once the broker is closed. ctx bounds the setup and
// supplies the values of the handlers' contexts; cancelling it later does
// not end the subscription.
func (b *Broker) Subscribe(ctx context.Context, pattern string, h calf.Handler, opts *calf.SubscribeOptions) (calf.Subscription, error) {
	if err := calf.ValidatePattern(pattern); err != nil {
		return nil, err
	}
	if h == nil {
		return nil, errors.New("nats: subscribe with nil handler")
	}
	var o calf.SubscribeOptions
	if opts != nil {
		o = *opts
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = b.opts.MaxAttempts
	}
	if o.Concurrency <= 0 {
		o.Concurrency = b.opts.Concurrency
	}
	if b.closed.Load() {
		return nil, calf.ErrClosed
	}
	sctx, cancel := context.WithCancel(context.WithValue(context.WithoutCancel(ctx), handlerKey{}, b))
	s := &subscription{
		b:           b,
		group:       o.Group,
		h:           h,
		ctx:         sctx,
		cancel:      cancel,
		maxAttempts: o.MaxAttempts,
		sem:         make(chan struct{}, min(o.Concurrency, b.opts.Partitions)),
	}
	if err := s.start(ctx, pattern); err != nil {
		_ = s.Close()
		if b.closed.Load() {
			return nil, calf.ErrClosed
		}
		return nil, err
	}
	b.mu.Lock()
	if b.closed.Load() {
		b.mu.Unlock()
		_ = s.Close()
		return nil, calf.ErrClosed
	}
	b.subs[s] = struct{}{}
	b.mu.Unlock()
	return s, nil
}

// subscription is one member of a group: a consumer per partition, each
// consumed one message at a time.
type subscription struct {
	b           *Broker
	group       string
	h           calf.Handler
	ctx         context.Context
	cancel      context.CancelFunc
	maxAttempts int
	sem         chan struct{} // bounds the partitions handled at once

	mu        sync.Mutex
	stopped   bool
	consumers []jetstream.ConsumeContext
	private   []string // names of the private group's consumers
	wg        sync.WaitGroup
	closeOnce sync.Once
}

// consumerName returns the durable consumer name of a group's partition.
func consumerName(group string, partition int) string {
	sum := sha256.Sum256([]byte(group))
	var clean strings.Builder
	for _, r := range group {
		if clean.Len() >= 32 {
			break
		}
		if r < 128 && (r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			clean.WriteRune(r)
		} else {
			clean.WriteByte('_')
		}
	}
	return clean.String() + "_" + hex.EncodeToString(sum[:6]) + "_p" + strconv.Itoa(partition)
}

// start creates or joins the consumers of every partition and starts
// consuming them.
func (s *subscription) start(ctx context.Context, pattern string) error {
	b := s.b
	for p := range b.opts.Partitions {
		cfg := jetstream.ConsumerConfig{
			DeliverPolicy: jetstream.DeliverNewPolicy,
			AckPolicy:     jetstream.AckExplicitPolicy,
			AckWait:       b.opts.AckWait,
			MaxDeliver:    s.maxAttempts + deliverMargin,
			FilterSubject: subject(b.opts.Prefix, p, pattern),
			MaxAckPending: 1,
		}
		var (
			cons jetstream.Consumer
			err  error
		)
		if s.group == "" {
			cfg.Description = "calf private group on " + pattern
			cfg.InactiveThreshold = DefaultPrivateInactive
			cons, err = b.js.CreateConsumer(ctx, b.opts.Stream, cfg)
			if err == nil {
				s.private = append(s.private, cons.CachedInfo().Name)
			}
		} else {
			cfg.Durable = consumerName(s.group, p)
			cfg.Description = "calf group " + s.group
			cons, err = s.join(ctx, cfg)
		}
		if err != nil {
			return err
		}
		cc, err := cons.Consume(func(m jetstream.Msg) { s.deliver(m) },
			jetstream.PullMaxMessages(1),
			jetstream.PullExpiry(pullExpiry),
			jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
				if s.ctx.Err() == nil {
					b.log.Debug("nats: consume", "group", s.group, "partition", p, "error", err)
				}
			}))
		if err != nil {
			return fmt.Errorf("nats: consume partition %d: %w", p, err)
		}
		s.mu.Lock()
		s.consumers = append(s.consumers, cc)
		s.mu.Unlock()
	}
	return nil
}

// join returns the durable consumer cfg names, creating it, or raising its
// MaxDeliver to cfg's. It fails with [ErrGroupPattern] when the consumer
// filters another subject.
func (s *subscription) join(ctx context.Context, cfg jetstream.ConsumerConfig) (jetstream.Consumer, error) {
	b := s.b
	cons, err := b.js.Consumer(ctx, b.opts.Stream, cfg.Durable)
	switch {
	case errors.Is(err, jetstream.ErrConsumerNotFound):
		cons, err = b.js.CreateConsumer(ctx, b.opts.Stream, cfg)
		if errors.Is(err, jetstream.ErrConsumerExists) {
			// Another member created it meanwhile.
			return s.join(ctx, cfg)
		}
		if err != nil {
			return nil, fmt.Errorf("nats: create consumer %s: %w", cfg.Durable, err)
		}
		return cons, nil
	case err != nil:
		return nil, fmt.Errorf("nats: consumer %s: %w", cfg.Durable, err)
	}
	have := cons.CachedInfo().Config
	if have.FilterSubject != cfg.FilterSubject {
		pattern := strings.SplitN(have.FilterSubject, ".", 3)
		return nil, fmt.Errorf("%w: group %q has pattern %q", ErrGroupPattern, s.group, pattern[len(pattern)-1])
	}
	if have.MaxDeliver >= cfg.MaxDeliver && have.AckWait == cfg.AckWait {
		return cons, nil
	}
	have.MaxDeliver = max(have.MaxDeliver, cfg.MaxDeliver)
	have.AckWait = cfg.AckWait
	cons, err = b.js.UpdateConsumer(ctx, b.opts.Stream, have)
	if err != nil {
		return nil, fmt.Errorf("nats: update consumer %s: %w", cfg.Durable, err)
	}
	return cons, nil
}

// Close stops fetching messages, cancels the handlers' context and waits
// for the handlers in progress. A message whose handler failed because of
// the close is handed back at once for another member of the group. The
// consumers of a private group are deleted; those of a named group stay,
// holding its messages for its other and future members.
func (s *subscription) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.stopped = true
		consumers := s.consumers
		s.mu.Unlock()
		// Stop fetching before the handlers refuse their messages, so
		// that those go to other members.
		for _, cc := range consumers {
			cc.Stop()
		}
		s.cancel()
		s.wg.Wait()
		b := s.b
		if len(s.private) > 0 && !b.nc.IsClosed() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			for _, name := range s.private {
				if err := b.js.DeleteConsumer(ctx, b.opts.Stream, name); err != nil {
					b.log.Debug("nats: delete private consumer", "consumer", name, "error", err)
				}
			}
			cancel()
		}
		b.mu.Lock()
		delete(b.subs, s)
		b.mu.Unlock()
	})
	return nil
}

// deliver handles one message of a partition; the consumer's callback
// calls it one message at a time.
func (s *subscription) deliver(jm jetstream.Msg) {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		_ = jm.Nak()
		return
	}
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()

	stop := s.keepAlive(jm)
	defer stop()
	select {
	case s.sem <- struct{}{}:
	case <-s.ctx.Done():
		_ = jm.Nak()
		return
	}
	defer func() { <-s.sem }()
	s.handle(jm)
}

// keepAlive tells the server every quarter of the ack wait that jm is
// still being worked on, until the returned function is called: three
// heartbeats may go missing (a busy machine, a slow network) before the
// server redelivers a message whose handler still runs.
func (s *subscription) keepAlive(jm jetstream.Msg) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(s.b.opts.AckWait / 4)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				_ = jm.InProgress()
			case <-done:
				return
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}

// handle decodes jm, calls the handler and settles the delivery.
func (s *subscription) handle(jm jetstream.Msg) {
	b := s.b
	attempt := 1
	if md, err := jm.Metadata(); err == nil {
		attempt = int(md.NumDelivered)
	}
	msgID := jm.Headers().Get(jetstream.MsgIDHeader)
	msg, err := decode(b.opts.Prefix, jm.Subject(), msgID, jm.Data())
	if err != nil {
		s.settle(jm, rawMessage(b.opts.Prefix, jm.Subject(), msgID, jm.Data()), calf.Permanent(err), attempt)
		return
	}
	if attempt > s.maxAttempts {
		// Deliveries ended without an outcome, by crashes or a shorter
		// MaxAttempts of another member.
		s.settle(jm, msg, fmt.Errorf("nats: delivered %d times, over the limit of %d", attempt, s.maxAttempts), attempt)
		return
	}
	msg.Metadata.Attempt = attempt
	s.settle(jm, msg, s.call(msg), attempt)
}

// call calls the handler, turning a panic into an error.
func (s *subscription) call(msg *calf.Message) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("nats: handler panicked on %s: %v\n%s", msg.Channel, r, debug.Stack())
		}
	}()
	return s.h(calf.ContextWithMessage(s.ctx, msg), msg)
}

// settle acknowledges, redelivers or parks jm according to the outcome err
// of its delivery number attempt.
func (s *subscription) settle(jm jetstream.Msg, msg *calf.Message, err error, attempt int) {
	b := s.b
	switch {
	case err == nil:
		_ = jm.Ack()
	case s.ctx.Err() != nil:
		// Interrupted by Close: hand it back at once.
		_ = jm.Nak()
	case attempt >= s.maxAttempts || calf.IsPermanent(err):
		if b.park(msg, s.group, err, attempt) {
			_ = jm.Term()
			return
		}
		_ = jm.NakWithDelay(b.opts.Backoff(attempt))
	default:
		_ = jm.NakWithDelay(b.opts.Backoff(attempt))
	}
}
