package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	goredis "github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/adapters"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/store/postgres"
	"github.com/calf-go/calf/store/redis"
)

// Distributed setups, BROKER+STORE: a broker and a store that the worker
// processes and the caller share. These two are the documented ones; -dist
// accepts every pair of a broker in distBrokers and a store in distStores.
const (
	setupNATSPostgres = "nats+postgres"
	setupKafkaRedis   = "kafka+redis"
)

// The brokers and stores of distributed setups.
var (
	distBrokers = []string{"nats", "kafka"}
	distStores  = []string{"postgres", "redis"}
)

// checkSetup reports a setup that is not BROKER+STORE with a known broker
// and store.
func checkSetup(setup string) error {
	b, s, _ := strings.Cut(setup, "+")
	if !slices.Contains(distBrokers, b) || !slices.Contains(distStores, s) {
		return fmt.Errorf("unknown setup %q: want BROKER+STORE, BROKER one of %s, STORE one of %s",
			setup, strings.Join(distBrokers, ", "), strings.Join(distStores, ", "))
	}
	return nil
}

// services are the addresses of the external services of the distributed
// setups. Kafka needs none: calf-bench runs franz-go's kfake itself.
type services struct {
	nats, postgres, redis string
}

// Default addresses of the services.
const (
	defaultNATSURL     = "nats://127.0.0.1:4222"
	defaultPostgresURL = "postgres://127.0.0.1:5432/test"
	defaultRedisURL    = "redis://127.0.0.1:6379/0"
)

// distPartitions is the default number of partitions of the broker of
// every distributed setup (-partitions), the adapters' default, set
// explicitly because every process must agree on it.
const distPartitions = 16

// tuning changes Calf's defaults in the systems measured; the zero value
// keeps them.
type tuning struct {
	// serveConcurrency bounds the runs each handler of the agent works on
	// at once (agent.ServeOptions.Concurrency, -serve-concurrency); 0
	// means the broker's default, its Options.Concurrency (1024 on every
	// Calf broker, per subscription and process).
	serveConcurrency int
	// partitions is the number of partitions of the distributed setups'
	// brokers (-partitions); 0 means distPartitions. Partitions spread
	// the runs over the workers; they do not bound the runs in flight.
	partitions int
}

// Timeouts of the worker processes.
const (
	workerStartTimeout = 60 * time.Second
	workerStopTimeout  = 20 * time.Second
	teardownTimeout    = 30 * time.Second
)

// workerReady is the line a worker prints once it serves W1.
const workerReady = "ready"

// distSystem returns the name of a distributed system in the report:
// calf/SETUP/Nw.
func distSystem(setup string, workers int) string {
	return "calf/" + setup + "/" + strconv.Itoa(workers) + "w"
}

// parseDistSystem is the inverse of distSystem.
func parseDistSystem(system string) (setup string, workers int, ok bool) {
	rest, ok := strings.CutPrefix(system, "calf/")
	if !ok {
		return "", 0, false
	}
	setup, n, ok := strings.Cut(rest, "/")
	if !ok || !strings.HasSuffix(n, "w") {
		return "", 0, false
	}
	workers, err := strconv.Atoi(strings.TrimSuffix(n, "w"))
	if err != nil || workers < 1 {
		return "", 0, false
	}
	return setup, workers, true
}

// workerSpec says where a worker process finds the broker, the store and
// the mock. It travels as JSON in the worker's -worker flag.
type workerSpec struct {
	// Broker is "nats" or "kafka".
	Broker string `json:"broker"`
	// NATSURL, Stream and Prefix locate the NATS stream.
	NATSURL string `json:"nats_url,omitempty"`
	Stream  string `json:"stream,omitempty"`
	Prefix  string `json:"prefix,omitempty"`
	// KafkaSeeds are the bootstrap brokers of the Kafka cluster.
	KafkaSeeds []string `json:"kafka_seeds,omitempty"`
	// Store is "postgres" or "redis"; StoreURL its address; Namespace the
	// PostgreSQL schema or the Redis key prefix of this measurement.
	Store     string `json:"store"`
	StoreURL  string `json:"store_url"`
	Namespace string `json:"namespace"`
	// Mock is the mock's base URL.
	Mock string `json:"mock"`
	// Concurrency sizes the worker's HTTP connection pool.
	Concurrency int `json:"concurrency"`
	// ServeConcurrency is agent.ServeOptions.Concurrency (0: the broker's
	// default); Partitions the broker's partitions (0: distPartitions).
	ServeConcurrency int `json:"serve_concurrency,omitempty"`
	Partitions       int `json:"partitions,omitempty"`
}

// brokerURL returns the URL of the broker, with the partitions (which
// every process must agree on) and the namespace in its query.
func (w *workerSpec) brokerURL() (string, error) {
	var u *url.URL
	q := url.Values{}
	switch w.Broker {
	case "nats":
		var err error
		if u, err = url.Parse(w.NATSURL); err != nil {
			return "", fmt.Errorf("%w: -nats: %v", errUsage, err)
		}
		q = u.Query()
		q.Set("stream", w.Stream)
		q.Set("prefix", w.Prefix)
	case "kafka":
		u = &url.URL{Scheme: "kafka", Host: strings.Join(w.KafkaSeeds, ",")}
		if w.Prefix != "" {
			q.Set("topic_prefix", w.Prefix)
		}
	default:
		return "", fmt.Errorf("%w: unknown broker %q", errUsage, w.Broker)
	}
	partitions := w.Partitions
	if partitions <= 0 {
		partitions = distPartitions
	}
	q.Set("partitions", strconv.Itoa(partitions))
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// openBroker opens the broker through the URL table, as the calf command
// does. The stores are opened directly: their URLs cannot name a schema or
// a key prefix.
func (w *workerSpec) openBroker(ctx context.Context) (calf.Broker, error) {
	raw, err := w.brokerURL()
	if err != nil {
		return nil, err
	}
	return adapters.OpenBroker(ctx, raw, nil)
}

// openStore opens the store of the spec. A store that fails to open is a
// nil interface, not a nil pointer in one, so that callers can tell.
func (w *workerSpec) openStore(ctx context.Context) (store.Store, error) {
	var (
		st  store.Store
		err error
	)
	switch w.Store {
	case "postgres":
		var pg *postgres.Store
		if pg, err = postgres.Open(ctx, w.StoreURL, &postgres.Options{Schema: w.Namespace, ApplicationName: "calf-bench"}); err == nil {
			st = pg
		}
	case "redis":
		var rd *redis.Store
		if rd, err = redis.Open(ctx, w.StoreURL, &redis.Options{KeyPrefix: w.Namespace}); err == nil {
			st = rd
		}
	default:
		err = fmt.Errorf("%w: unknown store %q", errUsage, w.Store)
	}
	return st, err
}

// distStack is W1 on a distributed setup: worker processes serve the
// agent; this process only calls agent.Run, on its own client of the same
// broker and store. Each stack gets a namespace of its own (a NATS stream
// or a Kafka cluster, a PostgreSQL schema or Redis key prefix), removed
// when it closes.
type distStack struct {
	spec    workerSpec
	broker  calf.Broker
	client  *calf.Client
	store   store.Store
	rt      *agent.Runtime
	agent   *agent.Agent[string]
	workers []*workerProc
	// life ends, with the cause, when a worker exits before close.
	life context.Context
	die  context.CancelCauseFunc
	// teardown removes the namespace, last first.
	teardown []func(context.Context) error
}

// newDistStack starts workers worker processes serving W1 on setup and
// connects this process to the same broker and store.
func newDistStack(ctx context.Context, setup string, workers int, svc services, base string, conc int, tune tuning, stderr io.Writer) (s *distStack, err error) {
	id := calf.NewID()[:12]
	spec := workerSpec{Mock: base, Concurrency: conc, ServeConcurrency: tune.serveConcurrency, Partitions: tune.partitions}
	s = &distStack{}
	s.life, s.die = context.WithCancelCause(context.Background())
	defer func() {
		if err != nil {
			err = errors.Join(err, s.close())
			s = nil
		}
	}()
	broker, st, ok := strings.Cut(setup, "+")
	if !ok {
		return nil, fmt.Errorf("%w: unknown distributed setup %q", errUsage, setup)
	}
	switch broker {
	case "nats":
		spec.Broker, spec.NATSURL = broker, svc.nats
		spec.Stream, spec.Prefix = "CALFBENCH_"+strings.ToUpper(id), "calfbench"+id
		s.teardown = append(s.teardown, func(ctx context.Context) error { return deleteStream(ctx, svc.nats, spec.Stream) })
	case "kafka":
		c, err := kfake.NewCluster(kfake.NumBrokers(1))
		if err != nil {
			return s, fmt.Errorf("start kfake: %w", err)
		}
		spec.Broker, spec.KafkaSeeds = broker, c.ListenAddrs()
		s.teardown = append(s.teardown, func(context.Context) error { c.Close(); return nil })
	default:
		return s, fmt.Errorf("%w: unknown broker %q in setup %q", errUsage, broker, setup)
	}
	switch st {
	case "postgres":
		spec.Store, spec.StoreURL, spec.Namespace = st, svc.postgres, "calfbench_"+id
		s.teardown = append(s.teardown, func(ctx context.Context) error { return dropSchema(ctx, svc.postgres, spec.Namespace) })
	case "redis":
		spec.Store, spec.StoreURL, spec.Namespace = st, svc.redis, "calfbench:"+id+":"
		s.teardown = append(s.teardown, func(ctx context.Context) error { return deleteKeys(ctx, svc.redis, spec.Namespace) })
	default:
		return s, fmt.Errorf("%w: unknown store %q in setup %q", errUsage, st, setup)
	}
	if s.broker, err = spec.openBroker(ctx); err != nil {
		return s, err
	}
	if s.store, err = spec.openStore(ctx); err != nil {
		return s, err
	}
	s.client = calf.NewClient(s.broker, nil)
	s.rt = agent.NewRuntime(s.client, s.store, nil)
	// The caller's agent is never served here; it only names the channels
	// and decodes the output. It has no use for a model client.
	if s.agent, err = newW1Agent(http.DefaultClient, base); err != nil {
		return s, err
	}
	s.spec = spec
	raw, err := json.Marshal(spec)
	if err != nil {
		return s, err
	}
	for i := range workers {
		w, err := startWorker(ctx, string(raw), stderr)
		if err != nil {
			return s, fmt.Errorf("worker %d: %w", i+1, err)
		}
		s.workers = append(s.workers, w)
		go func() {
			<-w.exited
			s.die(fmt.Errorf("worker %d (pid %d) exited: %v", i+1, w.cmd.Process.Pid, w.err))
		}()
	}
	return s, nil
}

// run does one W1 run and checks it. It fails when a worker has died.
func (s *distStack) run(ctx context.Context) error {
	if s.life.Err() != nil {
		return context.Cause(s.life)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(s.life, func() { cancel(context.Cause(s.life)) })
	defer stop()
	if err := runW1(ctx, s.agent, s.rt); err != nil {
		if s.life.Err() != nil {
			return context.Cause(s.life)
		}
		return err
	}
	return nil
}

// close stops the workers, closes this process's client, broker and
// store, and removes the namespace.
func (s *distStack) close() error {
	var errs []error
	s.die(nil) // from here on, workers exit because they are asked to
	for i, w := range s.workers {
		if err := w.stop(); err != nil {
			errs = append(errs, fmt.Errorf("worker %d: %w", i+1, err))
		}
	}
	if s.client != nil {
		errs = append(errs, s.client.Close())
	}
	if s.broker != nil {
		errs = append(errs, s.broker.Close())
	}
	if s.store != nil {
		errs = append(errs, s.store.Close())
	}
	ctx, cancel := context.WithTimeout(context.Background(), teardownTimeout)
	defer cancel()
	for i := len(s.teardown) - 1; i >= 0; i-- {
		errs = append(errs, s.teardown[i](ctx))
	}
	return errors.Join(errs...)
}

// workerProc is a running worker process.
type workerProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	exited chan struct{} // closed when the process has exited
	err    error         // its exit status, once exited is closed
}

// startWorker runs this binary as a worker serving W1 as spec says, and
// waits until it serves. The worker exits when its standard input closes.
func startWorker(ctx context.Context, spec string, stderr io.Writer) (*workerProc, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	w := &workerProc{cmd: exec.Command(exe, "-worker", spec), exited: make(chan struct{})}
	w.cmd.Stderr = stderr
	if w.stdin, err = w.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	first := &firstLine{line: make(chan string, 1)}
	w.cmd.Stdout = first
	if err := w.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		w.err = w.cmd.Wait()
		close(w.exited)
	}()
	select {
	case line := <-first.line:
		if line == workerReady {
			return w, nil
		}
		err = fmt.Errorf("said %q, want %q", line, workerReady)
	case <-w.exited:
		err = fmt.Errorf("exited before serving: %v", w.err)
	case <-time.After(workerStartTimeout):
		err = fmt.Errorf("not serving after %s", workerStartTimeout)
	case <-ctx.Done():
		err = context.Cause(ctx)
	}
	_ = w.cmd.Process.Kill()
	<-w.exited
	return nil, err
}

// stop asks the worker to exit and waits for it, killing it if it takes
// too long.
func (w *workerProc) stop() error {
	_ = w.stdin.Close()
	select {
	case <-w.exited:
		return w.err
	case <-time.After(workerStopTimeout):
		_ = w.cmd.Process.Kill()
		<-w.exited
		return fmt.Errorf("did not exit within %s when asked; killed it", workerStopTimeout)
	}
}

// serveWorker is the worker process: it serves W1's agent on the broker
// and store spec names, prints workerReady, and serves until ctx ends or
// stdin closes, then shuts down gracefully.
func serveWorker(ctx context.Context, rawSpec string, stdin io.Reader, stdout io.Writer) (err error) {
	var spec workerSpec
	if err := json.Unmarshal([]byte(rawSpec), &spec); err != nil {
		return fmt.Errorf("%w: -worker: %v", errUsage, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	b, err := spec.openBroker(ctx)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, b.Close()) }()
	st, err := spec.openStore(ctx)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, st.Close()) }()
	client := calf.NewClient(b, nil)
	defer func() {
		sctx, scancel := context.WithTimeout(context.Background(), workerStopTimeout/2)
		defer scancel()
		err = errors.Join(err, client.Shutdown(sctx))
	}()
	a, err := newW1Agent(newHTTPClient(spec.Concurrency), spec.Mock)
	if err != nil {
		return err
	}
	if err := a.Serve(ctx, agent.NewRuntime(client, st, nil), serveOptions(spec.ServeConcurrency)); err != nil {
		return err
	}
	if _, err := fmt.Fprintln(stdout, workerReady); err != nil {
		return err
	}
	go func() {
		_, _ = io.Copy(io.Discard, stdin)
		cancel()
	}()
	<-ctx.Done()
	return nil
}

// deleteStream deletes a NATS stream and its consumers.
func deleteStream(ctx context.Context, url, name string) error {
	nc, err := natsgo.Connect(url)
	if err != nil {
		return fmt.Errorf("delete stream %s: %w", name, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("delete stream %s: %w", name, err)
	}
	if err := js.DeleteStream(ctx, name); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("delete stream %s: %w", name, err)
	}
	return nil
}

// dropSchema drops a PostgreSQL schema and its tables.
func dropSchema(ctx context.Context, url, schema string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return fmt.Errorf("drop schema %s: %w", schema, err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
		return fmt.Errorf("drop schema %s: %w", schema, err)
	}
	return nil
}

// deleteKeys deletes the Redis keys that start with prefix.
func deleteKeys(ctx context.Context, url, prefix string) error {
	opts, err := goredis.ParseURL(url)
	if err != nil {
		return fmt.Errorf("delete keys %s*: %w", prefix, err)
	}
	c := goredis.NewClient(opts)
	defer c.Close()
	var keys []string
	flush := func() error {
		if len(keys) == 0 {
			return nil
		}
		err := c.Unlink(ctx, keys...).Err()
		keys = keys[:0]
		return err
	}
	iter := c.Scan(ctx, 0, escapeGlob(prefix)+"*", 1000).Iterator()
	for iter.Next(ctx) {
		if keys = append(keys, iter.Val()); len(keys) >= 1000 {
			if err := flush(); err != nil {
				return fmt.Errorf("delete keys %s*: %w", prefix, err)
			}
		}
	}
	if err := errors.Join(iter.Err(), flush()); err != nil {
		return fmt.Errorf("delete keys %s*: %w", prefix, err)
	}
	return nil
}

// escapeGlob escapes the characters Redis's glob patterns treat specially.
func escapeGlob(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
