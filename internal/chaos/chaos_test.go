package chaos

import (
	"context"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/adapters"
	"github.com/calf-go/calf/agent"
)

// config is one chaos run.
type config struct {
	name string
	// store is "postgres" or "redis"; the broker is always NATS.
	store string
	// targets are the services the injector takes down ("postgres",
	// "redis", "nats"); none in the worker-kill mode.
	targets []string
	actions []string
	// killWorkers is the worker-kill mode.
	killWorkers bool
	// cluster runs NATS as a cluster of three nodes (nats-1, nats-2,
	// nats-3) with the stream and the bucket of leases replicated on all
	// three; the targets are its nodes.
	cluster bool
	// once checks that no tool ran twice for a call and no model call of
	// a step was made twice: no worker dies, so none may start a call
	// that another has in hand.
	once        bool
	duration    time.Duration // the load window
	callers     int
	workers     int
	seed        uint64
	gap, outage span
	grace       time.Duration // how long a caller may wait past the window
	modelDelay  time.Duration
	// parkedOK expects runs parked (outages longer than the outage
	// budget); each must then be brought home by the replay.
	parkedOK bool
	// killRecovery, when set, bounds the 99th percentile of the recovery
	// after a worker kill (a figure of the long form: the short form
	// reports it without failing on a time).
	killRecovery time.Duration
	// outageBudget, when set, is the workers' and callers' outage budget
	// (the nats URL's outage_budget), shorter than the default to test
	// outages that outlast it.
	outageBudget time.Duration
}

// TestChaos is the short form of the chaos suite (see the package
// documentation): each subtest takes one service down at random under
// W1's load, or kills workers, and checks every run.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("the chaos suite takes minutes: not with -short")
	}
	needServices(t)
	for _, cfg := range []config{
		{name: "nats+postgres", store: "postgres", targets: []string{"postgres"}, actions: []string{"stop", "kill", "pause"}, once: true},
		{name: "nats+redis", store: "redis", targets: []string{"redis"}, actions: []string{"stop", "kill", "pause"}, once: true},
		{name: "nats-restart", store: "postgres", targets: []string{"nats"}, actions: []string{"kill", "pause"}},
		{name: "worker-kill", store: "postgres", killWorkers: true, workers: 3, gap: span{3 * time.Second, 8 * time.Second}},
		{name: "nats-cluster", store: "postgres", cluster: true, targets: []string{"nats-1", "nats-2", "nats-3"}, actions: []string{"kill"},
			once: true, gap: span{5 * time.Second, 10 * time.Second}, outage: span{2 * time.Second, 6 * time.Second}},
	} {
		t.Run(cfg.name, func(t *testing.T) {
			fromEnv(t, &cfg)
			runChaos(t, &cfg)
		})
	}
}

// fromEnv fills in cfg's defaults and what the environment sets.
func fromEnv(t *testing.T, cfg *config) {
	t.Helper()
	cfg.duration, cfg.callers, cfg.grace, cfg.modelDelay = 30*time.Second, 30, time.Minute, 20*time.Millisecond
	if cfg.workers == 0 {
		cfg.workers = 2
	}
	if cfg.gap == (span{}) {
		cfg.gap = span{5 * time.Second, 15 * time.Second}
	}
	if cfg.outage == (span{}) {
		cfg.outage = span{500 * time.Millisecond, 5 * time.Second}
	}
	cfg.seed = uint64(time.Now().UnixNano())
	durations := map[string]*time.Duration{
		"CALF_CHAOS_DURATION": &cfg.duration, "CALF_CHAOS_GRACE": &cfg.grace,
		"CALF_CHAOS_MODEL_DELAY": &cfg.modelDelay, "CALF_CHAOS_KILL_RECOVERY": &cfg.killRecovery,
		"CALF_CHAOS_OUTAGE_BUDGET": &cfg.outageBudget,
	}
	for env, d := range durations {
		if s := os.Getenv(env); s != "" {
			v, err := time.ParseDuration(s)
			if err != nil {
				t.Fatalf("%s: %v", env, err)
			}
			*d = v
		}
	}
	ints := map[string]*int{"CALF_CHAOS_CALLERS": &cfg.callers}
	if !cfg.killWorkers {
		ints["CALF_CHAOS_WORKERS"] = &cfg.workers
	}
	for env, n := range ints {
		if s := os.Getenv(env); s != "" {
			v, err := strconv.Atoi(s)
			if err != nil || v < 1 {
				t.Fatalf("%s=%q: want a positive number", env, s)
			}
			*n = v
		}
	}
	spans := map[string]*span{"CALF_CHAOS_OUTAGE": &cfg.outage}
	if !cfg.killWorkers {
		spans["CALF_CHAOS_GAP"] = &cfg.gap
	}
	for env, sp := range spans {
		if s := os.Getenv(env); s != "" {
			v, err := parseSpan(s)
			if err != nil {
				t.Fatalf("%s: %v", env, err)
			}
			*sp = v
		}
	}
	if s := os.Getenv("CALF_CHAOS_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("CALF_CHAOS_SEED: %v", err)
		}
		cfg.seed = v
	}
	if s := os.Getenv("CALF_CHAOS_ACTIONS"); s != "" && !cfg.killWorkers {
		cfg.actions = strings.Split(s, ",")
		for _, a := range cfg.actions {
			if a != "stop" && a != "term" && a != "kill" && a != "pause" {
				t.Fatalf("CALF_CHAOS_ACTIONS: unknown action %q: want stop, term, kill or pause", a)
			}
		}
	}
	cfg.parkedOK = os.Getenv("CALF_CHAOS_PARKED_OK") == "1"
}

// runChaos starts the services, the workers and the injector, runs the
// load, and verifies every run.
func runChaos(t *testing.T, cfg *config) {
	services := map[string]*service{}
	var brokerURL string
	var query []string
	if cfg.cluster {
		nodes, url := startNATSCluster(t)
		for _, n := range nodes {
			services[n.name] = n
		}
		brokerURL, query = url, append(query, "replicas=3")
	} else {
		services["nats"] = startNATS(t)
		brokerURL = services["nats"].url
	}
	switch cfg.store {
	case "postgres":
		services["postgres"] = startPostgres(t)
	case "redis":
		services["redis"] = startRedis(t)
	}
	h := newHarness(t, cfg.modelDelay)
	if cfg.outageBudget > 0 {
		query = append(query, "outage_budget="+cfg.outageBudget.String())
	}
	if len(query) > 0 {
		brokerURL += "?" + strings.Join(query, "&")
	}
	h.cfg = workerConfig{
		BrokerURL: brokerURL,
		StoreURL:  services[cfg.store].url,
		ModelURL:  h.model.URL(),
		Agent:     "calc",
	}

	// The callers' process: this one, on the same broker and store.
	log := slog.New(slog.NewJSONHandler(logWriter{h}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	b, err := adapters.OpenBroker(t.Context(), h.cfg.BrokerURL, &adapters.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	st, err := adapters.OpenStore(t.Context(), h.cfg.StoreURL, &adapters.Options{Logger: log})
	if err != nil {
		_ = b.Close()
		t.Fatal(err)
	}
	client := calf.NewClient(b, &calf.Options{Logger: log})
	t.Cleanup(func() {
		_ = client.Close()
		_ = b.Close()
		_ = st.Close()
	})
	a, err := newAgent(h.cfg.Agent, h.cfg.ModelURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &caller{rt: agent.NewRuntime(client, st, nil), b: b, agent: a, inflight: map[string]time.Time{}, outputs: map[string]int{}, outputIDs: map[string]string{}}
	if err := c.countOutputs(t.Context(), client); err != nil {
		t.Fatal(err)
	}

	workers := make([]*worker, cfg.workers)
	for i := range workers {
		if workers[i], err = h.startWorker(); err != nil {
			t.Fatal(err)
		}
	}
	for _, w := range workers {
		if err := h.waitReady(w); err != nil {
			t.Fatal(err)
		}
	}

	in := newInjector(cfg.seed)
	in.gap, in.length, in.actions, in.logf = cfg.gap, cfg.outage, cfg.actions, t.Logf
	for _, name := range cfg.targets {
		in.targets = append(in.targets, services[name])
	}
	if cfg.killWorkers {
		in.killWorker = h.killWorker
	}
	what := "outages of " + strings.Join(cfg.targets, ", ") + " (" + strings.Join(cfg.actions, ", ") + ") for " + cfg.outage.String()
	if cfg.killWorkers {
		what = "a worker killed with SIGKILL"
	}
	t.Logf("seed %d: %d callers, %d workers, %s for %s, %s every %s, model latency %s",
		cfg.seed, cfg.callers, cfg.workers, prompt, cfg.duration, what, cfg.gap, cfg.modelDelay)

	start := time.Now()
	end, bound := start.Add(cfg.duration), start.Add(cfg.duration+cfg.grace)
	injected := make(chan struct{})
	go func() {
		defer close(injected)
		in.run(t.Context(), end)
	}()
	c.load(cfg.callers, end, bound, 30*time.Second)
	<-injected
	loadEnd := time.Now()
	for _, s := range services {
		if err := s.waitReady(context.Background()); err != nil {
			t.Fatalf("after the load: %v", err)
		}
	}
	if cfg.killWorkers {
		h.mu.Lock()
		ws := append([]*worker(nil), h.workers...)
		h.mu.Unlock()
		for _, w := range ws {
			if err := h.waitReady(w); err != nil {
				t.Errorf("after the load: %v", err)
			}
		}
	}
	v := verify(t, h, c, st, in.all(), cfg, start, end, bound)
	v.loadTook = loadEnd.Sub(start)
	v.report(t, cfg)
}
