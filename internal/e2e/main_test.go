package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/brokertest"
	"github.com/calf-go/calf/eventlog"
	"github.com/calf-go/calf/internal/chaos"
	"github.com/calf-go/calf/internal/testproc"
	"github.com/calf-go/calf/model/openai"
	"github.com/calf-go/calf/schedule"
	"github.com/calf-go/calf/tool"
)

// workerEnv names the environment variable that turns the test binary into
// a worker process; its value is the worker's configuration as JSON.
const workerEnv = "CALF_E2E_WORKER"

func TestMain(m *testing.M) {
	testproc.Main(workerEnv, serveWorker)
	chaos.ServeNATSD()
	os.Exit(m.Run())
}

// workerConfig configures a worker process.
type workerConfig struct {
	// Broker is "nats", "kafka" or "memory"; BrokerURL the NATS URL or the
	// Kafka seed addresses, comma-separated.
	Broker    string `json:"broker"`
	BrokerURL string `json:"broker_url,omitempty"`
	// Namespace keeps a test apart from others on shared services: the NATS
	// stream and subject prefix, the Kafka topic prefix, the Redis key
	// prefix.
	Namespace string `json:"namespace"`
	// AckWait (NATS) and SessionTimeout (Kafka) are how long a dead
	// worker holds its messages; zero means the adapter's default.
	AckWait        time.Duration `json:"ack_wait,omitempty"`
	SessionTimeout time.Duration `json:"session_timeout,omitempty"`
	// Store is "postgres", "redis" or "sqlite"; StoreURL its URL, or the
	// SQLite file.
	Store    string `json:"store"`
	StoreURL string `json:"store_url"`
	// ModelURL is the base URL of the fake OpenAI-compatible server.
	ModelURL string `json:"model_url"`
	// Agent is the agent's name.
	Agent string `json:"agent"`
	// Crash is the crash point (see crashPoints), or empty. Each run
	// crashes at most once, whichever worker reaches the point first: a
	// marker file in CrashDir records it.
	Crash    string `json:"crash,omitempty"`
	CrashDir string `json:"crash_dir,omitempty"`
	// Approval makes add wait for a person's approval (permission mode
	// accept_reads; add is an execute tool).
	Approval bool `json:"approval,omitempty"`
	// DuplicateDeliveries, above 1, has every delivery handled that many
	// times.
	DuplicateDeliveries int `json:"duplicate_deliveries,omitempty"`
	// DuplicatePublishes, above 1, has every message published that many
	// times (a broker that drops duplicates by id keeps one).
	DuplicatePublishes int `json:"duplicate_publishes,omitempty"`
	// Trace has the worker record OpenTelemetry spans, each reported as a
	// "span" event when it ends.
	Trace bool `json:"trace,omitempty"`
	// EventLog has the worker record the event log (package eventlog)
	// too, in the recorders' group it shares with the test process.
	EventLog bool `json:"event_log,omitempty"`
	// Schedules has the worker serve schedules too (package schedule);
	// KillAtFire has it kill itself with SIGKILL right after it publishes
	// the firing of a schedule's timer due at an even second (every other
	// firing of a schedule of a second), before the timer is removed, and
	// right after it publishes the input of the run of a firing due at an
	// odd second, before the firing is recorded; once per firing (a marker
	// in CrashDir records it).
	Schedules  bool `json:"schedules,omitempty"`
	KillAtFire bool `json:"kill_at_fire,omitempty"`
	// Runs, on the memory broker, are the runs this process starts (or, in
	// a later life, submits again) as the caller, and waits for. Before
	// that, the process recovers the runs its previous life left.
	Runs []string `json:"runs,omitempty"`
}

// event is a line a worker writes on its standard output.
type event struct {
	// Ev is "ready", "handle" (a handler starts on a message), "crash",
	// "tool_start", "tool_done", "recovered", "output" or "fire" (a
	// schedule's timer fired: its firing published).
	Ev      string `json:"ev"`
	PID     int    `json:"pid"`
	T       int64  `json:"t"` // Unix nanoseconds
	Run     string `json:"run,omitempty"`
	Channel string `json:"channel,omitempty"`
	ID      string `json:"id,omitempty"`
	Attempt int    `json:"attempt,omitempty"`
	Point   string `json:"point,omitempty"`
	// Trace, Span and Parent identify an ended span ("span" events).
	Trace   string `json:"trace,omitempty"`
	Span    string `json:"span,omitempty"`
	Parent  string `json:"parent,omitempty"`
	Content string `json:"content,omitempty"`
	Error   string `json:"error,omitempty"`
	N       int    `json:"n,omitempty"`
}

// reporter writes events on standard output (testproc.Report).
type reporter struct {
	pid int
}

func (r *reporter) report(ev event) {
	ev.PID = r.pid
	if ev.T == 0 {
		ev.T = time.Now().UnixNano()
	}
	testproc.Report(ev)
}

// crash reports the crash and kills the process with SIGKILL: nothing
// after this point runs, no deferred call, no acknowledgement.
func (r *reporter) crash(run, point string) {
	r.report(event{Ev: "crash", Run: run, Point: point})
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {}
}

// crashPoint is a step boundary: the publish of an event of kind (the
// channel's token after the agent name; for inference, of step), before
// or after the broker takes it.
type crashPoint struct {
	kind  string
	step  int
	after bool
}

// crashPoints are the boundaries a worker can die at, besides "in_tool"
// (the tool kills its process).
var crashPoints = map[string]crashPoint{
	// The run's state is created; its first inference is not published.
	"input_saved": {kind: "inference", step: 1},
	// The model's response is recorded; the tool call is not published.
	"model_recorded": {kind: "tool_call"},
	// The tool call is published; the inference that emitted it is not
	// acknowledged.
	"tool_call_published": {kind: "tool_call", after: true},
	// The tool's result is recorded; the tool result is not published.
	"tool_recorded": {kind: "tool_result"},
	// The result is applied to the run; the second inference is not
	// published.
	"result_applied": {kind: "inference", step: 2},
	// The run's end is recorded; its output is not published.
	"before_output": {kind: "output"},
	// The output is published on the agent's output channel; the reply to
	// the caller is not.
	"output_published": {kind: "output", after: true},
}

// inTool is the crash point inside the tool.
const inTool = "in_tool"

// kindOf returns the token of an agent channel after the agent's name.
func kindOf(channel string) string {
	parts := strings.Split(channel, ".")
	if len(parts) < 4 || parts[0] != "calf" || parts[1] != "agent" {
		return ""
	}
	return parts[3]
}

// claimCrash reports whether this process is the first to reach point in
// run, by creating a marker file.
func claimCrash(dir, run, point string) bool {
	f, err := os.OpenFile(filepath.Join(dir, strings.ReplaceAll(run, "/", "_")+"."+point), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return false
	}
	_ = f.Close()
	return true
}

// workerBroker reports the start of every handler of an agent message,
// and kills the process at the configured crash point.
type workerBroker struct {
	calf.Broker
	cfg *workerConfig
	rep *reporter
}

func (b *workerBroker) Publish(ctx context.Context, msg *calf.Message) error {
	p, ok := crashPoints[b.cfg.Crash]
	hit := ok && kindOf(msg.Channel) == p.kind
	if hit && p.kind == "inference" {
		var ev struct {
			Step int `json:"step"`
		}
		hit = json.Unmarshal(msg.Data, &ev) == nil && ev.Step == p.step
	}
	if hit && !claimCrash(b.cfg.CrashDir, msg.Metadata.RunID, b.cfg.Crash) {
		hit = false
	}
	if hit && !p.after {
		b.rep.crash(msg.Metadata.RunID, b.cfg.Crash)
	}
	err := b.Broker.Publish(ctx, msg)
	if hit && err == nil {
		b.rep.crash(msg.Metadata.RunID, b.cfg.Crash)
	}
	if err == nil && msg.Channel == schedule.FireChannel {
		b.fired(ctx, msg)
	}
	if err == nil && msg.Channel == agent.InputChannel(b.cfg.Agent) {
		b.startedByFiring(ctx, msg)
	}
	return err
}

// Subscribed is the wrapped broker's, when it has one (see package
// internal/timers): a timer is not fired into a broker that would drop
// its event.
func (b *workerBroker) Subscribed(channel string) bool { return subscribedOn(b.Broker, channel) }

// subscribedOn reports whether b, or the broker it wraps, would keep a
// message on channel for a subscriber, when it can tell; true when not.
func subscribedOn(b calf.Broker, channel string) bool {
	for b != nil {
		if sb, ok := b.(interface{ Subscribed(string) bool }); ok {
			return sb.Subscribed(channel)
		}
		u, ok := b.(interface{ Unwrap() calf.Broker })
		if !ok {
			break
		}
		b = u.Unwrap()
	}
	return true
}

func (b *workerBroker) Subscribe(ctx context.Context, pattern string, h calf.Handler, opts *calf.SubscribeOptions) (calf.Subscription, error) {
	return b.Broker.Subscribe(ctx, pattern, func(ctx context.Context, msg *calf.Message) error {
		if kindOf(msg.Channel) != "" {
			b.rep.report(event{Ev: "handle", Run: msg.Metadata.RunID, Channel: msg.Channel, ID: msg.ID, Attempt: msg.Metadata.Attempt})
		}
		return h(ctx, msg)
	}, opts)
}

// Workload W1: the agent has one tool, add; the model calls add(2, 3),
// then answers with the tool's result.
const (
	prompt     = "add 2 and 3"
	wantOutput = "The sum is 5"
	// runMarker precedes the run id in the system prompt, so that the
	// fake model counts its calls per run.
	runMarker = "Run: "
)

type addArgs struct {
	A int `json:"a" jsonschema:"the first addend"`
	B int `json:"b" jsonschema:"the second addend"`
}

// newAgent returns W1's agent calling the fake model at modelURL. The tool
// reports its start and end through rep, and kills the process when crash
// is "in_tool" (once per run, by the marker in crashDir). With a nil rep
// the agent is only a handle for callers: it has the tool but is not served.
func newAgent(name, modelURL string, rep *reporter, crash, crashDir string, approval ...bool) (*agent.Agent[string], error) {
	m, err := openai.New(openai.Options{Model: "test", BaseURL: modelURL, APIKey: "e2e", MaxRetries: -1})
	if err != nil {
		return nil, err
	}
	add, err := tool.New("add", "Add two integers.", func(ctx context.Context, in addArgs) (int, error) {
		rc, _ := agent.FromContext(ctx)
		if rep != nil {
			rep.report(event{Ev: "tool_start", Run: rc.RunID})
			if crash == inTool && claimCrash(crashDir, rc.RunID, inTool) {
				rep.crash(rc.RunID, inTool)
			}
			defer rep.report(event{Ev: "tool_done", Run: rc.RunID})
		}
		return in.A + in.B, nil
	})
	if err != nil {
		return nil, err
	}
	var perms *agent.Permissions
	if len(approval) > 0 && approval[0] {
		perms = &agent.Permissions{Mode: agent.PermissionAcceptReads}
	}
	return agent.New(name, m, &agent.Options{
		InstructionsFunc: func(rc agent.RunContext) (string, error) {
			return "Use the add tool. " + runMarker + rc.RunID, nil
		},
		Tools:       []tool.Tool{add},
		Permissions: perms,
	})
}

// serveWorker is the worker process: it serves the agent until ctx ends,
// when its standard input closes; or, when the test set conversationEnv or
// workflowEnv, a conversation host or a workflow.
func serveWorker(ctx context.Context, cfg *workerConfig) error {
	if raw := os.Getenv(conversationEnv); raw != "" {
		var ccfg convWorkerConfig
		if err := json.Unmarshal([]byte(raw), &ccfg); err != nil {
			return fmt.Errorf("conversation worker: bad configuration: %w", err)
		}
		return serveConversationWorker(ctx, cfg, &ccfg)
	}
	if raw := os.Getenv(workflowEnv); raw != "" {
		var wcfg workflowWorkerConfig
		if err := json.Unmarshal([]byte(raw), &wcfg); err != nil {
			return fmt.Errorf("workflow worker: bad configuration: %w", err)
		}
		return serveWorkflowWorker(ctx, cfg, &wcfg)
	}
	rep := &reporter{pid: os.Getpid()}
	b, err := openBroker(ctx, cfg)
	if err != nil {
		return err
	}
	defer b.Close()
	st, err := openStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	var wrapped calf.Broker = b
	if cfg.DuplicateDeliveries > 1 {
		wrapped = brokertest.DuplicateDeliveries(wrapped, cfg.DuplicateDeliveries)
	}
	if cfg.DuplicatePublishes > 1 {
		wrapped = brokertest.DuplicatePublishes(wrapped, cfg.DuplicatePublishes)
	}
	client := calf.NewClient(&workerBroker{Broker: wrapped, cfg: cfg, rep: rep}, &calf.Options{Name: calf.ProcessName()})
	var ropts agent.RuntimeOptions
	if cfg.Trace {
		ropts.TracerProvider = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spanReporter{rep}))
	}
	rt := agent.NewRuntime(client, st, &ropts)
	a, err := newAgent(cfg.Agent, cfg.ModelURL, rep, cfg.Crash, cfg.CrashDir, cfg.Approval)
	if err != nil {
		return err
	}
	if err := a.Serve(ctx, rt, nil); err != nil {
		return err
	}
	if cfg.Schedules {
		if err := schedule.New(rt, nil).Serve(ctx); err != nil {
			return err
		}
	}
	if cfg.EventLog {
		if err := eventlog.New(client, st).Record(ctx, nil); err != nil {
			return err
		}
	}
	var wg sync.WaitGroup
	if cfg.Broker == "memory" {
		// The caller lives in this process. It recovers the runs its
		// previous life left, then submits its runs (again, after a
		// restart: a run that ended answers with its output).
		n, err := a.Recover(ctx, rt, nil)
		if err != nil {
			return err
		}
		rep.report(event{Ev: "recovered", N: n})
		for _, id := range cfg.Runs {
			wg.Go(func() {
				out, err := a.Run(ctx, rt, prompt, &agent.RunOptions{RunID: id})
				ev := event{Ev: "output", Run: id}
				if err != nil {
					if ctx.Err() != nil {
						return
					}
					ev.Error = err.Error()
				} else {
					ev.Content = out.Output
				}
				rep.report(ev)
			})
		}
	}
	rep.report(event{Ev: "ready"})
	<-ctx.Done()
	wg.Wait()
	sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer scancel()
	if err := client.Shutdown(sctx); err != nil && !errors.Is(err, calf.ErrClosed) {
		return err
	}
	return nil
}

// spanReporter reports each span that ends as a "span" event.
type spanReporter struct{ rep *reporter }

func (s spanReporter) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

func (s spanReporter) OnEnd(span sdktrace.ReadOnlySpan) {
	ev := event{Ev: "span", Content: span.Name(), Trace: span.SpanContext().TraceID().String(), Span: span.SpanContext().SpanID().String(), Parent: span.Parent().SpanID().String()}
	for _, kv := range span.Attributes() {
		if kv.Key == "calf.run.id" {
			ev.Run = kv.Value.AsString()
		}
	}
	s.rep.report(ev)
}

func (spanReporter) Shutdown(context.Context) error   { return nil }
func (spanReporter) ForceFlush(context.Context) error { return nil }
