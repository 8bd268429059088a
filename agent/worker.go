package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent/approval"
	"github.com/calf-go/calf/deadletter"
	"github.com/calf-go/calf/store"
)

// Defaults of [WorkerOptions].
const (
	DefaultDrainTimeout      = 30 * time.Second
	DefaultWorkerConcurrency = 1024
)

// WorkerOptions configures a [Worker]. A nil *WorkerOptions means the
// defaults.
type WorkerOptions struct {
	// Client configures the worker's client. Default: the defaults, with
	// Logger.
	Client *calf.Options
	// Runtime configures the worker's runtime. Default: the defaults.
	Runtime *RuntimeOptions
	// Logger receives the worker's diagnostics: when it starts draining
	// and when it has stopped. Default: discard.
	Logger *slog.Logger
	// DrainTimeout bounds how long [Worker.Run] lets the handlers in
	// progress finish once its context ends. After it, their contexts are
	// cancelled, and the messages they were handling are handed back to
	// the broker unacknowledged, for another worker. Default:
	// [DefaultDrainTimeout].
	DrainTimeout time.Duration
	// NoDeadLetters turns off the recorder that keeps the messages parked
	// on [calf.DeadLetterChannel] in the store (see package deadletter).
	NoDeadLetters bool
	// Concurrency bounds the handler calls the worker makes at once,
	// across every agent and handler it serves: the model calls and tool
	// calls in progress, and so the runs it works on at once. A message
	// beyond it waits in the broker's subscription, which holds a bounded
	// number in memory (see [ServeOptions.Concurrency] and the broker's
	// options); the broker's partitions do not bound it. Default:
	// [DefaultWorkerConcurrency].
	Concurrency int
	// ApprovalSweep, when positive, is how often the worker also lists
	// every approval request to deny those that expired unanswered
	// ([approval.Expire]). Each request with an expiry is denied when it
	// expires by a durable timer of its own, so the sweep is only for
	// requests recorded without one (by versions before the timers):
	// zero sweeps once, when the worker starts; negative never. Default:
	// once.
	ApprovalSweep time.Duration
	// Retention, when positive, has the worker remove the runs that ended
	// longer ago than it ([Runtime.Sweep]), when it starts and then every
	// RetentionSweep, unless another process sharing the store swept it
	// within most of that period ([SweepOptions.Every]): of several
	// workers, one sweeps each period. A sweep in progress when the
	// worker stops finishes within the drain timeout, or is cut short (the
	// next goes on where it stopped). Default: runs are kept.
	Retention time.Duration
	// RetentionSweep is how often the worker sweeps when Retention is
	// set. Default: an hour.
	RetentionSweep time.Duration
}

// defaultRetentionSweep is the default of [WorkerOptions.RetentionSweep].
const defaultRetentionSweep = time.Hour

// Worker hosts the handlers of agents in one process, on a broker that
// other processes share, and shuts them down gracefully. Serve agents on
// [Worker.Runtime], then call [Worker.Run]: it records dead letters in the
// store, blocks until its context ends, and then drains: it stops taking
// new messages, lets the handlers in progress finish (up to
// [WorkerOptions.DrainTimeout]) and leaves every message it has not
// handled unacknowledged, so that the broker redelivers it to another
// worker. Several workers serving the same agents share their messages
// through the broker's consumer groups.
type Worker struct {
	broker  *drainBroker
	client  *calf.Client
	rt      *Runtime
	store   store.Store
	log     *slog.Logger
	drain   time.Duration
	recordD bool
	sweep   time.Duration
	// retention and retentionEvery: see WorkerOptions.Retention.
	retention, retentionEvery time.Duration

	runMu   sync.Mutex
	started bool
	running bool
}

// NewWorker returns a worker on the broker b and the store s. The worker
// does not close them: the caller does, after Run returns.
func NewWorker(b calf.Broker, s store.Store, opts *WorkerOptions) *Worker {
	var o WorkerOptions
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.DrainTimeout <= 0 {
		o.DrainTimeout = DefaultDrainTimeout
	}
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultWorkerConcurrency
	}
	var co calf.Options
	if o.Client != nil {
		co = *o.Client
	}
	if co.Logger == nil {
		co.Logger = o.Logger
	}
	db := newDrainBroker(b, o.Concurrency)
	client := calf.NewClient(db, &co)
	return &Worker{
		broker: db, client: client, rt: NewRuntime(client, s, o.Runtime), store: s,
		log: o.Logger, drain: o.DrainTimeout, recordD: !o.NoDeadLetters, sweep: o.ApprovalSweep,
		retention: o.Retention, retentionEvery: cmp.Or(o.RetentionSweep, defaultRetentionSweep),
	}
}

// Runtime returns the worker's runtime: serve agents on it, and start runs
// through it.
func (w *Worker) Runtime() *Runtime { return w.rt }

// Start subscribes the dead-letter recorder (unless turned off), so that
// the worker is fully up when it returns. Run calls it if it was not
// called; calling it again does nothing.
func (w *Worker) Start(ctx context.Context) error {
	w.runMu.Lock()
	defer w.runMu.Unlock()
	if w.started {
		return nil
	}
	if w.recordD {
		w.rt.AddSweeper("deadletter", deadletter.Sweep)
		if err := deadletter.Serve(ctx, w.client, w.store); err != nil {
			return fmt.Errorf("agent: worker: %w", err)
		}
	}
	w.started = true
	return nil
}

// Run starts the worker (see [Worker.Start]), then blocks until ctx ends,
// and then drains the worker's subscriptions, as described on [Worker].
// It returns nil when every handler finished within the drain timeout,
// and an error when some had to be interrupted. A worker runs once.
func (w *Worker) Run(ctx context.Context) error {
	w.runMu.Lock()
	if w.running {
		w.runMu.Unlock()
		return errors.New("agent: worker: Run called twice")
	}
	w.running = true
	w.runMu.Unlock()
	if err := w.Start(ctx); err != nil {
		w.shutdown(0)
		return err
	}
	w.rt.ServeTimers()
	if w.sweep >= 0 {
		go w.expireApprovals(ctx)
	}
	// A sweep in progress when ctx ends finishes within the drain timeout,
	// as the handlers do: a process that lives briefly (calf run) sweeps
	// as it starts, and stops soon after.
	swept := make(chan struct{})
	sctx, stopSweep := context.WithCancel(context.WithoutCancel(ctx))
	if w.retention > 0 {
		go w.sweepRuns(ctx, sctx, swept)
	} else {
		close(swept)
	}
	<-ctx.Done()
	w.log.Info("calf worker: draining", "timeout", w.drain)
	timer := time.AfterFunc(w.drain, stopSweep)
	defer timer.Stop()
	err := w.shutdown(w.drain)
	<-swept
	stopSweep()
	return err
}

// Interrupt cancels the contexts of the handlers in progress, as the end
// of the drain timeout does: their messages go back to the broker. Call it
// to cut a drain short, on a second signal say; the handlers of a worker
// that is not draining are interrupted too.
func (w *Worker) Interrupt() { w.broker.interrupt() }

// shutdown stops the subscriptions and waits for the handlers in progress,
// interrupting them after drain.
func (w *Worker) shutdown(drain time.Duration) error {
	timer := time.AfterFunc(drain, w.broker.interrupt)
	defer timer.Stop()
	err := w.client.Shutdown(context.Background())
	if w.broker.interrupted() {
		err = errors.Join(err, fmt.Errorf("agent: worker: handlers in progress were interrupted (by the drain timeout of %s, or by Interrupt); their messages go back to the broker", drain))
	}
	w.log.Info("calf worker: stopped")
	return err
}

// CreateChannels passes the call on to the wrapped broker.
func (d *drainBroker) CreateChannels(ctx context.Context, channels ...string) error {
	return calf.CreateChannels(ctx, d.Broker, channels...)
}

// GroupMembers passes the call on to the wrapped broker, which must be a
// [calf.GroupInspector].
func (d *drainBroker) GroupMembers(ctx context.Context, group string) (int, error) {
	n, known, err := calf.GroupMembers(ctx, d.Broker, group)
	if err == nil && !known {
		err = errors.ErrUnsupported
	}
	return n, err
}

// drainBroker wraps a broker so that closing a subscription lets the
// handlers in progress finish instead of cancelling them at once: their
// context is cancelled only by interrupt.
type drainBroker struct {
	calf.Broker
	hard       context.Context
	stopHandle context.CancelFunc
	slots      chan struct{} // bounds the handler calls in progress

	mu     sync.Mutex
	active int  // handlers in progress
	cut    bool // interrupt found handlers in progress
}

func newDrainBroker(b calf.Broker, concurrency int) *drainBroker {
	hard, cancel := context.WithCancel(context.Background())
	return &drainBroker{Broker: b, hard: hard, stopHandle: cancel, slots: make(chan struct{}, concurrency)}
}

// interrupt cancels the contexts of the handlers in progress, and of
// those that start later.
func (d *drainBroker) interrupt() {
	d.mu.Lock()
	d.cut = d.cut || d.active > 0
	d.mu.Unlock()
	d.stopHandle()
}

// interrupted reports whether interrupt cut a handler short.
func (d *drainBroker) interrupted() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cut
}

// Subscribe subscribes h so that its context survives the closing of the
// subscription until interrupt, and so that it runs only while it has one
// of the worker's slots. The message of a handler that succeeds is
// acknowledged; one that fails after the subscription closed goes back to
// the broker.
func (d *drainBroker) Subscribe(ctx context.Context, pattern string, h calf.Handler, opts *calf.SubscribeOptions) (calf.Subscription, error) {
	wrapped := func(hctx context.Context, msg *calf.Message) error {
		select {
		case d.slots <- struct{}{}:
		case <-hctx.Done():
			return context.Cause(hctx) // closing: the message goes back
		}
		defer func() { <-d.slots }()
		d.mu.Lock()
		d.active++
		d.mu.Unlock()
		defer func() {
			d.mu.Lock()
			d.active--
			d.mu.Unlock()
		}()
		ctx, cancel := context.WithCancel(context.WithoutCancel(hctx))
		defer cancel()
		stop := context.AfterFunc(d.hard, cancel)
		defer stop()
		return h(ctx, msg)
	}
	return d.Broker.Subscribe(ctx, pattern, wrapped, opts)
}

// sweepRuns removes the runs older than the retention, now and every
// w.retentionEvery until ctx ends, each sweep under sctx, and closes done
// when the last has returned.
func (w *Worker) sweepRuns(ctx, sctx context.Context, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(w.retentionEvery)
	defer t.Stop()
	for {
		// Of the workers sharing the store, the first whose tick comes
		// once the last sweep is most of a period old sweeps; the others
		// skip theirs.
		res, err := w.rt.Sweep(sctx, SweepOptions{Before: w.rt.now().Add(-w.retention), Every: w.retentionEvery * 9 / 10})
		if err != nil && sctx.Err() == nil {
			w.log.Warn("calf worker: sweeping finished runs", "err", err)
		} else if res != nil && res.Runs > 0 {
			w.log.Info("calf worker: removed finished runs", "runs", res.Runs, "records", res.Records, "retention", w.retention)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// expireApprovals denies the expired approval requests once, and then
// every w.sweep (when positive) until ctx ends.
func (w *Worker) expireApprovals(ctx context.Context) {
	var tick <-chan time.Time
	if w.sweep > 0 {
		t := time.NewTicker(w.sweep)
		defer t.Stop()
		tick = t.C
	}
	for {
		if n, err := approval.Expire(ctx, w.rt.store, w.rt.client); err != nil && ctx.Err() == nil {
			w.log.Warn("calf worker: expiring approval requests", "err", err)
		} else if n > 0 {
			w.log.Info("calf worker: denied expired approval requests", "count", n)
		}
		if tick == nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick:
		}
	}
}
