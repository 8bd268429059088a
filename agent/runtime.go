package agent

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent/approval"
	"github.com/calf-go/calf/agent/internal/engine"
	"github.com/calf-go/calf/agent/internal/sessionstore"
	"github.com/calf-go/calf/agent/internal/telemetry"
	"github.com/calf-go/calf/internal/flow"
	"github.com/calf-go/calf/internal/idem"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/store"
)

// RuntimeOptions configures a [Runtime]. A nil *RuntimeOptions means the
// defaults.
type RuntimeOptions struct {
	// Logger receives the runtime's diagnostics. Default: the client's logger.
	Logger *slog.Logger
	// Now returns the current time. Default: the client's clock.
	Now func() time.Time
	// NewID returns a fresh run id. Default: [calf.NewID].
	NewID func() string
	// Prices price the model calls of the runs this runtime's handlers
	// carry out ([Output.Cost]). Default: [model.DefaultPrices]. A model
	// the table does not have is reported as unpriced, never guessed.
	Prices model.Prices
	// TracerProvider and MeterProvider, when set, receive the runtime's
	// OpenTelemetry spans and metrics, with the semantic conventions of
	// generative AI: an invoke_agent span for each run a caller starts
	// (Run, RunStream, Submit), a chat span for each model call and an
	// execute_tool span for each tool call, children of the run's span in
	// whichever process they happen (the trace context travels in the
	// messages' traceparent); the histograms gen_ai.client.token.usage and
	// gen_ai.client.operation.duration, the counter calf.agent.runs and
	// the histogram calf.message.lag. Unset, nothing is recorded (pass
	// otel.GetTracerProvider() and otel.GetMeterProvider() for the global
	// ones).
	TracerProvider trace.TracerProvider
	MeterProvider  metric.MeterProvider
	// ServeOnDemand, when set, makes the runtime serve in this process
	// what runs on it: [Agent.Run], [Agent.RunStream], [Agent.Submit] and
	// [Agent.Recover] of an agent not served on the runtime yet serve it
	// first ([Agent.Serve]), once per runtime, its handlers living as long
	// as the runtime's client; teams and workflows do the same. It is for
	// a runtime of one process, such as package local's, where no worker
	// serves anything. Default: false, the runs are carried out by
	// whichever processes serve their agents on the broker.
	ServeOnDemand bool
	// TimerPoll bounds the time between two reads of the store's due
	// timers by this process's timer loop ([Runtime.ServeTimers]): a
	// timer started by another process fires at most this late. Default:
	// a second.
	TimerPoll time.Duration
	// IdempotencyWindow is how long a caller's idempotency key
	// ([RunOptions.IdempotencyKey]) names the run it started. Default:
	// 24 hours.
	IdempotencyWindow time.Duration
	// FlowPoll bounds the time between two passes of this process over
	// the runs that wait under flow control ([FlowControl]): a slot freed
	// by a run's end, or a debounce window that is over, is taken up at
	// most this late. Default: 200 milliseconds.
	FlowPoll time.Duration
}

// Runtime connects agents to a broker (through a [calf.Client]) and a state
// store. Serve registers an agent's handlers on a runtime; Run and
// RunStream start runs through it. One runtime serves any number of agents
// and is safe for concurrent use. Package local makes a runtime of one
// process, which serves what runs on it ([RuntimeOptions.ServeOnDemand]).
// The methods of a nil *Runtime that return an error return one matching
// [ErrNoRuntime], as do the functions and methods of agents, teams and
// workflows given a nil one.
type Runtime struct {
	client *calf.Client
	store  store.Store
	log    *slog.Logger
	now    func() time.Time
	newID  func() string
	// runs reads and writes the runs' records: the shared store
	// protocol, or its shortcut on a local broker (see runStore).
	runs *runStore
	// sessions are the sessions of the store, with the messages of
	// recent ones cached.
	sessions *sessionstore.Sessions
	prices   model.Prices
	// serveOnDemand is RuntimeOptions.ServeOnDemand.
	serveOnDemand bool
	// tel records spans and metrics; nil records nothing.
	tel *telemetry.Telemetry
	// late counts tool calls that returned after their timeout.
	late atomic.Int64
	// tools runs tool calls on goroutines kept for the next call.
	tools engine.Executor
	// prepared holds the input channels whose group the broker has
	// prepared, and preparing is held by the caller preparing one (see
	// prepareInput).
	prepared  sync.Map
	preparing chan struct{}

	kindMu     sync.Mutex
	kinds      map[string]RunKind // by name, see AddKind
	sweepMu    sync.Mutex
	sweepers   map[string]store.Sweeper
	sweepOrder []string

	// timers are the store's durable timers (see StartTimer), and
	// timerPoll is RuntimeOptions.TimerPoll.
	timers    timerService
	timerPoll time.Duration
	// deadlines are the kinds of run whose deadlines this process
	// handles.
	deadlines deadlineSubs
	// idemWindow is RuntimeOptions.IdempotencyWindow.
	idemWindow time.Duration
	// flowPoll is RuntimeOptions.FlowPoll, and gates the runners served
	// with flow control, by "{kind}/{name}".
	flowPoll time.Duration
	mu       sync.Mutex
	gates    map[string]*flow.Gate
}

// NewRuntime returns a runtime on client and s.
func NewRuntime(client *calf.Client, s store.Store, opts *RuntimeOptions) *Runtime {
	var o RuntimeOptions
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = client.Logger()
	}
	if o.Now == nil {
		o.Now = client.Now
	}
	if o.NewID == nil {
		o.NewID = calf.NewID
	}
	if o.Prices == nil {
		o.Prices = model.DefaultPrices()
	}
	if o.IdempotencyWindow <= 0 {
		o.IdempotencyWindow = DefaultIdempotencyWindow
	}
	rt := &Runtime{client: client, store: s, log: o.Logger, now: o.Now, newID: o.NewID, sessions: sessionstore.New(s, o.Now, o.Logger, true), prices: o.Prices, serveOnDemand: o.ServeOnDemand, timerPoll: o.TimerPoll, idemWindow: o.IdempotencyWindow, flowPoll: o.FlowPoll, preparing: make(chan struct{}, 1),
		tel: telemetry.New(o.TracerProvider, o.MeterProvider)}
	rt.runs = newRunStore(rt, calf.IsLocal(client.Broker()))
	rt.AddSweeper("idempotency", func(ctx context.Context, s store.Store, before time.Time) (int, int, error) {
		n, err := idem.Sweep(ctx, s, before)
		return 0, n, err
	})
	return rt
}

// Client returns the runtime's client.
func (rt *Runtime) Client() *calf.Client { return rt.client }

// Store returns the runtime's state store.
func (rt *Runtime) Store() store.Store { return rt.store }

// Respond answers the approval request id of one of the runtime's runs:
// it records the answer in the runtime's store and publishes it with the
// runtime's client, as [approval.Respond] does with them, so that the
// worker serving the run carries it out, in this process or another on
// the same broker. Its errors are approval.Respond's ([approval.ErrAnswered],
// [approval.ErrNotFound], [approval.ErrMismatch], [approval.ErrExpired], an
// error matching [approval.ErrRunEnded]), and a nil runtime's is [ErrNoRuntime].
func (rt *Runtime) Respond(ctx context.Context, id string, ans approval.Answer) (*approval.Approval, error) {
	if rt == nil {
		return nil, ErrNoRuntime
	}
	return approval.Respond(ctx, rt.store, rt.client, id, ans)
}

// ServesOnDemand reports whether the runtime serves agents, teams and
// workflows on demand ([RuntimeOptions.ServeOnDemand]); false for a nil
// runtime.
func (rt *Runtime) ServesOnDemand() bool { return rt != nil && rt.serveOnDemand }

// LateToolResults returns how many tool calls handled by this runtime
// returned after their timeout (see [Options.ToolTimeout]): their results
// were dropped, since the model had been given a timeout error for them.
// Each is also logged at level Warn.
func (rt *Runtime) lateToolResults() int64 { return rt.late.Load() }
