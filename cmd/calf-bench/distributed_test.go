package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	goredis "github.com/redis/go-redis/v9"
)

// service returns the URL of a test service from envVar, or def, and skips
// the test when its host does not answer (fails it when
// CALF_TEST_SERVICES is set).
func service(t *testing.T, envVar, def string) string {
	t.Helper()
	raw := os.Getenv(envVar)
	if raw == "" {
		raw = def
	}
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("%s: %v", envVar, err)
	}
	conn, err := net.DialTimeout("tcp", u.Host, 2*time.Second)
	if err != nil {
		if os.Getenv("CALF_TEST_SERVICES") != "" {
			t.Fatalf("%s is unreachable: %v", u.Host, err)
		}
		t.Skipf("%s is unreachable (set %s): %v", u.Host, envVar, err)
	}
	_ = conn.Close()
	return raw
}

// setupServices returns the services setup needs, skipping the test when
// one is unreachable.
func setupServices(t *testing.T, setup string) services {
	t.Helper()
	var svc services
	b, s, _ := strings.Cut(setup, "+")
	if b == "nats" {
		svc.nats = service(t, "CALF_TEST_NATS_URL", defaultNATSURL)
	}
	switch s {
	case "postgres":
		svc.postgres = service(t, "CALF_TEST_POSTGRES_URL", defaultPostgresURL)
	case "redis":
		svc.redis = service(t, "CALF_TEST_REDIS_URL", defaultRedisURL)
	}
	return svc
}

// TestBenchDistributed measures W1 on each documented distributed setup
// with one and two worker processes, the test binary standing in for the
// command.
func TestBenchDistributed(t *testing.T) {
	t.Setenv(asMainEnv, "1")
	for _, setup := range []string{setupNATSPostgres, setupKafkaRedis} {
		t.Run(setup, func(t *testing.T) {
			svc := setupServices(t, setup)
			const runs = 8
			rep, err := bench(t.Context(), config{
				runs: runs, warmup: 2, levels: []int{1, 4}, dists: []string{setup}, workers: []int{1, 2},
				svc: svc, mock: mockInproc, rounds: 1,
			}, os.Stderr)
			if err != nil {
				t.Fatal(err)
			}
			systems := []string{systemFloor, "calf/" + setup + "/1w", "calf/" + setup + "/2w"}
			all := []int{runs, runs, runs}
			want := []shape{
				{Concurrency: 1, Systems: systems, Runs: all, Validated: all,
					Targets: []string{systems[1] + ": overhead < 25%", systems[2] + ": overhead < 25%"}},
				{Concurrency: 4, Systems: systems, Runs: all, Validated: all,
					Targets: []string{systems[1] + ": throughput ratio >= 80%", systems[2] + ": throughput ratio >= 80%"}},
			}
			if diff := cmp.Diff(want, shapeOf(rep)); diff != "" {
				t.Errorf("report shape (-want +got):\n%s", diff)
			}
			if !strings.Contains(rep.Method, "worker processes") {
				t.Errorf("the method does not explain the distributed systems: %s", rep.Method)
			}
			checkFigures(t, rep)
		})
	}
}

// A distributed stack removes its stream, cluster, schema or keys when it
// closes, and a worker that dies makes runs fail at once instead of
// waiting for an output that will not come. The two setups between them
// use every broker and store, in the pairs TestBenchDistributed does not.
func TestDistStack(t *testing.T) {
	t.Setenv(asMainEnv, "1")
	for _, setup := range []string{"nats+redis", "kafka+postgres"} {
		t.Run(setup, func(t *testing.T) {
			svc := setupServices(t, setup)
			ms, err := startMock(t.Context(), mockInproc, w1, 0, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = ms.close() })
			s, err := newDistStack(t.Context(), setup, 2, svc, ms.url, 4, tuning{}, os.Stderr)
			if err != nil {
				t.Fatal(err)
			}
			closed := false
			t.Cleanup(func() {
				if !closed {
					_ = s.close()
				}
			})
			for range 3 {
				if err := s.run(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
			w := s.workers[0]
			if err := w.cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			<-w.exited
			if err := s.run(t.Context()); err == nil || !strings.Contains(err.Error(), "worker 1") {
				t.Errorf("run after a worker died: %v, want an error naming worker 1", err)
			}
			spec := s.spec
			closed = true
			if err := s.close(); err == nil || !strings.Contains(err.Error(), "worker 1") {
				t.Errorf("close = %v, want the killed worker's exit reported", err)
			}
			checkNamespaceGone(t, spec)
		})
	}
}

// checkNamespaceGone reports what is left of spec's namespace.
func checkNamespaceGone(t *testing.T, spec workerSpec) {
	t.Helper()
	ctx := t.Context()
	switch spec.Broker {
	case "nats":
		nc, err := natsgo.Connect(spec.NATSURL)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := js.Stream(ctx, spec.Stream); !errors.Is(err, jetstream.ErrStreamNotFound) {
			t.Errorf("stream %s after close: %v, want not found", spec.Stream, err)
		}
	case "kafka":
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		var d net.Dialer
		if conn, err := d.DialContext(cctx, "tcp", spec.KafkaSeeds[0]); err == nil {
			_ = conn.Close()
			t.Errorf("the kfake cluster at %s still answers after close", spec.KafkaSeeds[0])
		}
	}
	switch spec.Store {
	case "postgres":
		conn, err := pgx.Connect(ctx, spec.StoreURL)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM information_schema.schemata WHERE schema_name = $1", spec.Namespace).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("schema %s is still there after close", spec.Namespace)
		}
	case "redis":
		opts, err := goredis.ParseURL(spec.StoreURL)
		if err != nil {
			t.Fatal(err)
		}
		c := goredis.NewClient(opts)
		defer c.Close()
		iter := c.Scan(ctx, 0, escapeGlob(spec.Namespace)+"*", 1000).Iterator()
		for iter.Next(ctx) {
			t.Errorf("key %s is still there after close", iter.Val())
		}
		if err := iter.Err(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestBrokerURL(t *testing.T) {
	for _, tc := range []struct {
		spec workerSpec
		want string
	}{
		{workerSpec{Broker: "nats", NATSURL: "nats://127.0.0.1:4222", Stream: "S", Prefix: "p"},
			"nats://127.0.0.1:4222?partitions=16&prefix=p&stream=S"},
		{workerSpec{Broker: "kafka", KafkaSeeds: []string{"127.0.0.1:1", "127.0.0.1:2"}},
			"kafka://127.0.0.1:1,127.0.0.1:2?partitions=16"},
		{workerSpec{Broker: "kafka", KafkaSeeds: []string{"127.0.0.1:1"}, Prefix: "t."},
			"kafka://127.0.0.1:1?partitions=16&topic_prefix=t."},
		{workerSpec{Broker: "kafka", KafkaSeeds: []string{"127.0.0.1:1"}, Partitions: 64},
			"kafka://127.0.0.1:1?partitions=64"},
	} {
		got, err := tc.spec.brokerURL()
		if err != nil || got != tc.want {
			t.Errorf("brokerURL(%+v) = %q, %v; want %q", tc.spec, got, err, tc.want)
		}
	}
	if _, err := (&workerSpec{Broker: "memory"}).brokerURL(); !errors.Is(err, errUsage) {
		t.Errorf("brokerURL of an unknown broker: %v", err)
	}
}

func TestParseDistSystem(t *testing.T) {
	for _, tc := range []struct {
		system  string
		setup   string
		workers int
		ok      bool
	}{
		{distSystem(setupNATSPostgres, 2), setupNATSPostgres, 2, true},
		{"calf/kafka+redis/1w", setupKafkaRedis, 1, true},
		{"calf/memory", "", 0, false},
		{"floor", "", 0, false},
		{"calf/nats+postgres/0w", "", 0, false},
		{"calf/nats+postgres/x", "", 0, false},
	} {
		setup, workers, ok := parseDistSystem(tc.system)
		if setup != tc.setup || workers != tc.workers || ok != tc.ok {
			t.Errorf("parseDistSystem(%q) = %q, %d, %v; want %q, %d, %v", tc.system, setup, workers, ok, tc.setup, tc.workers, tc.ok)
		}
	}
	for _, bad := range []string{"kafka+sqlite", "memory+redis", "nats", ""} {
		if err := checkSetup(bad); err == nil {
			t.Errorf("checkSetup(%q) = nil", bad)
		}
	}
}

// TestBenchDistributedModelDelay measures the documented distributed
// setups with a model delay: the worker processes call the delayed mock,
// every run in the window is validated, and the figures are set against
// the ideal ones.
func TestBenchDistributedModelDelay(t *testing.T) {
	t.Setenv(asMainEnv, "1")
	for _, setup := range []string{setupNATSPostgres, setupKafkaRedis} {
		t.Run(setup, func(t *testing.T) {
			svc := setupServices(t, setup)
			rep, err := bench(t.Context(), config{
				levels: []int{3}, dists: []string{setup}, workers: []int{1, 2}, svc: svc, mock: mockInproc, rounds: 1,
				delay: testDelay, window: time.Second, runTimeout: 10 * time.Second,
				tuning: tuning{partitions: 4},
			}, os.Stderr)
			if err != nil {
				t.Fatal(err)
			}
			want := []delayShape{{Concurrency: 3, IdealRunsPerSec: 75, IdealLatency: 40 * time.Millisecond,
				Systems: []string{systemFloor, distSystem(setup, 1), distSystem(setup, 2)}, Failed: []int{0, 0, 0}}}
			if diff := cmp.Diff(want, delayShapeOf(rep)); diff != "" {
				t.Errorf("report shape (-want +got):\n%s", diff)
			}
			checkDelayFigures(t, rep, testDelay)
			if !strings.Contains(rep.Method, "4 partitions") {
				t.Errorf("the method does not give the partitions: %s", rep.Method)
			}
		})
	}
}

// TestBenchDistributedCold checks -cold: each round sends the level's runs
// at once to a worker just started, and every one of them is measured.
func TestBenchDistributedCold(t *testing.T) {
	t.Setenv(asMainEnv, "1")
	svc := setupServices(t, setupNATSPostgres)
	rep, err := bench(t.Context(), config{
		levels: []int{8}, dists: []string{setupNATSPostgres}, workers: []int{1}, svc: svc, mock: mockInproc, rounds: 2,
		delay: testDelay, window: 300 * time.Millisecond, runTimeout: 10 * time.Second, cold: true,
		tuning: tuning{partitions: 4},
	}, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	want := []delayShape{{Concurrency: 8, IdealRunsPerSec: 200, IdealLatency: 40 * time.Millisecond,
		Systems: []string{systemFloor, distSystem(setupNATSPostgres, 1)}, Failed: []int{0, 0}}}
	if diff := cmp.Diff(want, delayShapeOf(rep)); diff != "" {
		t.Errorf("report shape (-want +got):\n%s", diff)
	}
	checkDelayFigures(t, rep, testDelay)
	lv := rep.Levels[0]
	if !lv.Cold || lv.RunsPerRound != 8 || lv.WindowNS != 0 {
		t.Errorf("level: cold %v, runs per round %d, window %v; want cold, 8, none", lv.Cold, lv.RunsPerRound, lv.WindowNS)
	}
	for _, r := range lv.Results {
		if r.Runs != 2*8 {
			t.Errorf("%s: %d runs, want 8 in each of 2 rounds", r.System, r.Runs)
		}
	}
	if !strings.Contains(rep.Method, "cold starts") {
		t.Errorf("the method does not say it measures cold starts: %s", rep.Method)
	}
	var out strings.Builder
	if err := writeDelayTable(&out, rep); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "8 runs sent at once") {
		t.Errorf("the table does not say how it measured:\n%s", out.String())
	}
}

// TestDistStackStoreDown checks that a stack whose store cannot be opened
// fails with the store's error, and closes what it had opened, instead of
// closing a store that never opened.
func TestDistStackStoreDown(t *testing.T) {
	svc := services{postgres: "postgres://127.0.0.1:1/test?connect_timeout=2"}
	s, err := newDistStack(t.Context(), "kafka+postgres", 0, svc, "http://127.0.0.1:1/v1", 1, tuning{}, io.Discard)
	if err == nil {
		_ = s.close()
		t.Fatal("a stack on a store that is down started")
	}
	if s != nil {
		t.Errorf("a failed stack was returned: %+v", s)
	}
	if !strings.Contains(err.Error(), "127.0.0.1") && !strings.Contains(strings.ToLower(err.Error()), "connect") {
		t.Errorf("the error does not say the store could not be reached: %v", err)
	}
}
