package chaos

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/adapters"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/internal/testproc"
	"github.com/calf-go/calf/model/openai"
	"github.com/calf-go/calf/tool"
)

// workerEnv turns the test binary into a worker process; its value is the
// process's configuration as JSON.
const workerEnv = "CALF_CHAOS_WORKER"

func TestMain(m *testing.M) {
	testproc.Main(workerEnv, serveWorker)
	ServeNATSD()
	// go-redis reports failed dials through a logger of its own; the
	// verifier counts what matters from the adapters' loggers.
	goredis.SetLogger(quietRedis{})
	os.Exit(m.Run())
}

// quietRedis is a go-redis logger that says nothing.
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

// workerConfig configures a worker process.
type workerConfig struct {
	BrokerURL string `json:"broker_url"`
	StoreURL  string `json:"store_url"`
	ModelURL  string `json:"model_url"`
	Agent     string `json:"agent"`
}

// event is a line a worker writes on its standard output.
type event struct {
	// Ev is "ready", "handle" (a handler starts on a message of an agent
	// channel) or "tool" (add starts).
	Ev      string `json:"ev"`
	PID     int    `json:"pid"`
	T       int64  `json:"t"` // Unix nanoseconds
	Run     string `json:"run,omitempty"`
	Channel string `json:"channel,omitempty"`
}

// reporter writes events on standard output (testproc.Report).
type reporter struct {
	pid int
}

func (r *reporter) report(ev event) {
	ev.PID = r.pid
	ev.T = time.Now().UnixNano()
	testproc.Report(ev)
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
// reports each execution through rep; with a nil rep the agent is only a
// handle for callers.
func newAgent(name, modelURL string, rep *reporter) (*agent.Agent[string], error) {
	m, err := openai.New(openai.Options{Model: "test", BaseURL: modelURL, APIKey: "chaos", MaxRetries: -1})
	if err != nil {
		return nil, err
	}
	add, err := tool.New("add", "Add two integers.", func(ctx context.Context, in addArgs) (int, error) {
		if rep != nil {
			rc, _ := agent.FromContext(ctx)
			rep.report(event{Ev: "tool", Run: rc.RunID})
		}
		return in.A + in.B, nil
	})
	if err != nil {
		return nil, err
	}
	return agent.New(name, m, &agent.Options{
		InstructionsFunc: func(rc agent.RunContext) (string, error) {
			return "Use the add tool. " + runMarker + rc.RunID, nil
		},
		Tools: []tool.Tool{add},
	})
}

// serveWorker is the worker process: it serves W1's agent until ctx ends,
// when its standard input closes. Its diagnostics (the brokers' parked and
// dropped messages among them) go to standard error as JSON lines.
func serveWorker(ctx context.Context, cfg *workerConfig) error {
	level := slog.LevelWarn
	if os.Getenv("CALF_CHAOS_DEBUG") != "" {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	rep := &reporter{pid: os.Getpid()}
	b, err := adapters.OpenBroker(ctx, cfg.BrokerURL, &adapters.Options{Logger: log})
	if err != nil {
		return err
	}
	defer b.Close()
	st, err := adapters.OpenStore(ctx, cfg.StoreURL, &adapters.Options{Logger: log})
	if err != nil {
		return err
	}
	defer st.Close()
	w := agent.NewWorker(&reportingBroker{Broker: b, rep: rep}, st, &agent.WorkerOptions{
		Logger: log,
		Client: &calf.Options{Logger: log, Name: calf.ProcessName()},
	})
	a, err := newAgent(cfg.Agent, cfg.ModelURL, rep)
	if err != nil {
		return err
	}
	if err := a.Serve(ctx, w.Runtime(), nil); err != nil {
		return err
	}
	if err := w.Start(ctx); err != nil {
		return err
	}
	rep.report(event{Ev: "ready"})
	return w.Run(ctx)
}

// reportingBroker reports the start of every handler of an agent message.
// It passes the broker's optional abilities through.
type reportingBroker struct {
	calf.Broker
	rep *reporter
}

func (b *reportingBroker) Subscribe(ctx context.Context, pattern string, h calf.Handler, opts *calf.SubscribeOptions) (calf.Subscription, error) {
	return b.Broker.Subscribe(ctx, pattern, func(ctx context.Context, msg *calf.Message) error {
		if isAgentChannel(msg.Channel) {
			b.rep.report(event{Ev: "handle", Run: msg.Metadata.RunID, Channel: msg.Channel})
		}
		return h(ctx, msg)
	}, opts)
}

func (b *reportingBroker) CreateChannels(ctx context.Context, channels ...string) error {
	return calf.CreateChannels(ctx, b.Broker, channels...)
}

func (b *reportingBroker) DeleteChannels(ctx context.Context, channels ...string) error {
	return calf.DeleteChannels(ctx, b.Broker, channels...)
}

func (b *reportingBroker) GroupMembers(ctx context.Context, group string) (int, error) {
	n, known, err := calf.GroupMembers(ctx, b.Broker, group)
	if err == nil && !known {
		err = errors.New("chaos: the broker cannot tell a group's members")
	}
	return n, err
}

// isAgentChannel reports whether channel is an agent's (calf.agent.NAME.KIND).
func isAgentChannel(channel string) bool {
	return len(channel) > len("calf.agent.") && channel[:len("calf.agent.")] == "calf.agent."
}
