package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/broker/kafka"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/broker/nats"
	"github.com/calf-go/calf/internal/chaos"
	"github.com/calf-go/calf/internal/testwait"
	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/store/postgres"
	"github.com/calf-go/calf/store/redis"
	"github.com/calf-go/calf/store/sqlite"
)

// openBroker opens the broker a worker (or the parent) uses.
func openBroker(ctx context.Context, cfg *workerConfig) (calf.Broker, error) {
	switch cfg.Broker {
	case "nats":
		opts := &nats.Options{Stream: "E2E_" + cfg.Namespace, Prefix: "e2e" + cfg.Namespace, AckWait: cfg.AckWait}
		for attempt := 1; ; attempt++ {
			b, err := nats.Open(ctx, cfg.BrokerURL, opts)
			// The server can fail to create a stream's storage while
			// another test deletes the last stream (error 10049): retry.
			if err == nil {
				return b, nil
			}
			if attempt == 5 || !strings.Contains(err.Error(), "err_code=10049") {
				return nil, err
			}
			select {
			case <-ctx.Done():
				return nil, err
			case <-time.After(200 * time.Millisecond):
			}
		}
	case "kafka":
		return kafka.Open(ctx, strings.Split(cfg.BrokerURL, ","), &kafka.Options{
			TopicPrefix: "e2e" + cfg.Namespace + ".", Partitions: 4, SessionTimeout: cfg.SessionTimeout,
		})
	case "memory":
		return memory.New(nil), nil
	}
	return nil, fmt.Errorf("unknown broker %q", cfg.Broker)
}

// openStore opens the store a worker (or the parent) uses.
func openStore(ctx context.Context, cfg *workerConfig) (store.Store, error) {
	switch cfg.Store {
	case "postgres":
		return postgres.Open(ctx, cfg.StoreURL, nil)
	case "redis":
		return redis.Open(ctx, cfg.StoreURL, &redis.Options{KeyPrefix: "e2e:" + cfg.Namespace + ":"})
	case "sqlite":
		return sqlite.Open(cfg.StoreURL, nil)
	}
	return nil, fmt.Errorf("unknown store %q", cfg.Store)
}

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

// backend is a broker and a store the workers share.
type backend struct {
	name string
	// setup fills in the broker and store of cfg, starting what the test
	// needs, and removes it when the test ends.
	setup func(t *testing.T, cfg *workerConfig)
}

// natsPostgres is NATS (the machine's server) with PostgreSQL.
var natsPostgres = backend{name: "nats+postgres", setup: func(t *testing.T, cfg *workerConfig) {
	cfg.Broker, cfg.BrokerURL = "nats", service(t, "CALF_TEST_NATS_URL", "nats://127.0.0.1:4222")
	cfg.Store, cfg.StoreURL = "postgres", service(t, "CALF_TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
	stream, u := "E2E_"+cfg.Namespace, cfg.BrokerURL
	t.Cleanup(func() {
		nc, err := natsgo.Connect(u)
		if err != nil {
			t.Errorf("connect to delete stream: %v", err)
			return
		}
		defer nc.Close()
		js, _ := jetstream.New(nc)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := js.DeleteStream(ctx, stream); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
			t.Errorf("delete stream %s: %v", stream, err)
		}
	})
}}

// privateNATSPostgres is a NATS server and a PostgreSQL of the test's
// own (package chaos starts them on free ports outside the ephemeral
// range, in temporary directories), so that the test is alone on them.
var privateNATSPostgres = backend{name: "private nats+postgres", setup: func(t *testing.T, cfg *workerConfig) {
	chaos.NeedPostgres(t)
	cfg.Broker, cfg.BrokerURL = "nats", chaos.StartNATS(t)
	cfg.Store, cfg.StoreURL = "postgres", chaos.StartPostgres(t)
}}

// waitStreamSettled waits until no consumer of the NATS stream of cfg
// has a message waiting for delivery or delivered and not acknowledged:
// nothing is left to deliver, again or for the first time.
func waitStreamSettled(t *testing.T, cfg *workerConfig) {
	t.Helper()
	nc, err := natsgo.Connect(cfg.BrokerURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	stream := "E2E_" + cfg.Namespace
	testwait.ForErr(t, waitTimeout, "the stream "+stream+" to settle", func() error {
		s, err := js.Stream(t.Context(), stream)
		if err != nil {
			return err
		}
		var busy []string
		infos := s.ListConsumers(t.Context())
		for ci := range infos.Info() {
			if ci.NumPending > 0 || ci.NumAckPending > 0 {
				busy = append(busy, fmt.Sprintf("%s: %d pending, %d acknowledgements pending", ci.Name, ci.NumPending, ci.NumAckPending))
			}
		}
		if err := infos.Err(); err != nil {
			return err
		}
		if len(busy) > 0 {
			return errors.New(strings.Join(busy, "; "))
		}
		return nil
	})
}

// kafkaRedis is Kafka (kfake, in this process, on TCP) with Redis.
var kafkaRedis = backend{name: "kafka+redis", setup: func(t *testing.T, cfg *workerConfig) {
	cfg.Store, cfg.StoreURL = "redis", service(t, "CALF_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.GroupMinSessionTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cfg.Broker, cfg.BrokerURL = "kafka", strings.Join(c.ListenAddrs(), ",")
}}

// memorySQLite is the embedded default: the memory broker and a SQLite
// file; the caller and the worker are one process.
var memorySQLite = backend{name: "memory+sqlite", setup: func(t *testing.T, cfg *workerConfig) {
	cfg.Broker = "memory"
	cfg.Store, cfg.StoreURL = "sqlite", t.TempDir()+"/calf.db"
}}
