package adapters_test

import (
	"context"
	"errors"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/adapters"
	"github.com/calf-go/calf/store"
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
	conn.Close()
	return raw
}

// natsTestURL returns the URL of the NATS server at server with a stream
// and a subject prefix of the test's own, and deletes the stream when the
// test ends.
func natsTestURL(t *testing.T, server string) string {
	t.Helper()
	name := "calftest" + strings.ToLower(calf.NewID()[:12])
	t.Cleanup(func() {
		nc, err := natsgo.Connect(server)
		if err != nil {
			t.Errorf("delete the test stream: %v", err)
			return
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err == nil {
			err = js.DeleteStream(context.Background(), name)
		}
		if err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
			t.Errorf("delete the test stream: %v", err)
		}
	})
	return server + "?stream=" + name + "&prefix=" + name
}

func TestSchemes(t *testing.T) {
	if diff := cmp.Diff([]string{"kafka", "memory", "nats", "nats+embedded"}, adapters.BrokerSchemes()); diff != "" {
		t.Errorf("BrokerSchemes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"memory", "postgres", "postgresql", "redis", "rediss", "sqlite"}, adapters.StoreSchemes()); diff != "" {
		t.Errorf("StoreSchemes (-want +got):\n%s", diff)
	}
}

func TestOpenBrokerErrors(t *testing.T) {
	for _, tc := range []struct {
		url     string
		want    error
		message string // a part of the error's text
	}{
		{"", adapters.ErrUnknownScheme, "no scheme"},
		{"127.0.0.1:4222", adapters.ErrUnknownScheme, `unknown scheme "127.0.0.1"`},
		{"amqp://host", adapters.ErrUnknownScheme, "known schemes: kafka, memory, nats, nats+embedded"},
		{"memory://x", adapters.ErrBadURL, "takes nothing after the scheme"},
		{"nats:", adapters.ErrBadURL, "want nats://HOST:PORT"},
		{"nats://", adapters.ErrBadURL, "no host"},
		{"nats://h1:4222,", adapters.ErrBadURL, "empty host"},
		{"nats://h1:notaport", adapters.ErrBadURL, "bad port"},
		{"nats://h1:4222/path", adapters.ErrBadURL, "no path"},
		{"nats://h1:4222?partitions=0", adapters.ErrBadURL, "partitions"},
		{"nats://h1:4222?replica=3", adapters.ErrBadURL, `unknown parameter "replica": known: outage_budget, partitions, prefix, replicas, stream`},
		{"nats://h1:4222?outage_budget=soon", adapters.ErrBadURL, `outage_budget="soon": want a positive duration`},
		{"nats://h1:4222?outage_budget=-1m", adapters.ErrBadURL, `outage_budget="-1m": want a positive duration`},
		{"nats://h1:4222?replicas=-1", adapters.ErrBadURL, "replicas"},
		{"nats+embedded://", adapters.ErrBadURL, "needs the directory"},
		{"kafka://", adapters.ErrBadURL, "no host"},
		{"kafka://h1:9092?partitions=x", adapters.ErrBadURL, "partitions"},
		{"kafka://h1:9092?partition=3", adapters.ErrBadURL, `unknown parameter "partition"`},
		{"kafka://u:p@h1:9092", adapters.ErrBadURL, "take no credentials"},
	} {
		t.Run(tc.url, func(t *testing.T) {
			b, err := adapters.OpenBroker(t.Context(), tc.url, nil)
			if err == nil {
				b.Close()
				t.Fatalf("OpenBroker(%q) succeeded", tc.url)
			}
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.message) {
				t.Errorf("OpenBroker(%q) = %v; want %v containing %q", tc.url, err, tc.want, tc.message)
			}
		})
	}
}

func TestOpenStoreErrors(t *testing.T) {
	for _, tc := range []struct {
		url     string
		want    error
		message string
	}{
		{"sqlite", adapters.ErrUnknownScheme, "no scheme"},
		{"mysql://h/db", adapters.ErrUnknownScheme, "known schemes: memory, postgres, postgresql, redis, rediss, sqlite"},
		{"memory:x", adapters.ErrBadURL, "takes nothing after the scheme"},
		{"redis://", adapters.ErrBadURL, "no host"},
		{"postgres://u:pw@[::1", adapters.ErrBadURL, "missing ']'"},
	} {
		t.Run(tc.url, func(t *testing.T) {
			s, err := adapters.OpenStore(t.Context(), tc.url, nil)
			if err == nil {
				s.Close()
				t.Fatalf("OpenStore(%q) succeeded", tc.url)
			}
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.message) {
				t.Errorf("OpenStore(%q) = %v; want %v containing %q", tc.url, err, tc.want, tc.message)
			}
		})
	}
}

// TestPasswordsStayOut opens URLs with passwords that fail, and checks that
// no error shows the password.
func TestPasswordsStayOut(t *testing.T) {
	const secret = "s3cr3t-pw"
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	// Port 1 refuses connections on the loopback interface.
	for _, raw := range []string{
		"postgres://calf:" + secret + "@127.0.0.1:1/db?connect_timeout=2",
		"postgresql://calf:" + secret + "@[::1/db",
		"postgres://calf@127.0.0.1:1/db?connect_timeout=2&password=" + secret,
		"postgres://calf:" + secret + "@127.0.0.1:1/db?schema=",
		"redis://calf:" + secret + "@127.0.0.1:1/0",
		"nats://calf:" + secret + "@127.0.0.1:1",
		"nats://calf:" + secret + "@h1:4222,",
		"kafka://calf:" + secret + "@h1:9092",
		"mysql://calf:" + secret + "@h/db",
		"memory://calf:" + secret + "@x",
	} {
		var err error
		if strings.HasPrefix(raw, "nats") || strings.HasPrefix(raw, "kafka") || strings.HasPrefix(raw, "memory") {
			var b calf.Broker
			if b, err = adapters.OpenBroker(ctx, raw, nil); err == nil {
				b.Close()
			}
		} else {
			var s store.Store
			if s, err = adapters.OpenStore(ctx, raw, nil); err == nil {
				s.Close()
			}
		}
		if err == nil {
			t.Errorf("opening %s succeeded, want an error", adapters.Redact(raw))
			continue
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("the error of %s shows the password: %v", adapters.Redact(raw), err)
		}
	}
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://u:pw@h:5432/db":                     "postgres://u:xxxxx@h:5432/db",
		"postgres://u@h/db":                             "postgres://u@h/db",
		"nats://u:pw@h1:4222,h2:4222":                   "nats://u:xxxxx@h1:4222,h2:4222",
		"redis://:pw@h:6379/0":                          "redis://:xxxxx@h:6379/0",
		"sqlite:/tmp/x.db":                              "sqlite:/tmp/x.db",
		"postgres://u@h/db?password=pw&sslmode=disable": "postgres://u@h/db?password=xxxxx&sslmode=disable",
	} {
		if got := adapters.Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

// roundTrip publishes one message on b and checks that a subscriber gets it.
func roundTrip(t *testing.T, b calf.Broker) {
	t.Helper()
	ch := "calf.test.adapters." + calf.NewID()
	got := make(chan *calf.Message, 1)
	sub, err := b.Subscribe(t.Context(), ch, func(_ context.Context, m *calf.Message) error {
		select {
		case got <- m:
		default:
		}
		return nil
	}, &calf.SubscribeOptions{Group: "adapters-test-" + calf.NewID()})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	want := &calf.Message{ID: calf.NewID(), Channel: ch, Key: "k", Data: []byte(`"hello"`), Metadata: calf.Metadata{Time: time.Now()}}
	if err := b.Publish(t.Context(), want); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-got:
		if m.ID != want.ID || string(m.Data) != `"hello"` {
			t.Errorf("got message %s %s, want %s \"hello\"", m.ID, m.Data, want.ID)
		}
	case <-t.Context().Done():
		t.Fatal("no message")
	}
}

// putGet writes and reads a record in s.
func putGet(t *testing.T, s store.Store) {
	t.Helper()
	id := calf.NewID()
	if _, err := s.Put(t.Context(), "adapters_test", id, []byte("v"), 0); err != nil {
		t.Fatal(err)
	}
	rec, err := s.Get(t.Context(), "adapters_test", id)
	if err != nil || string(rec.Data) != "v" {
		t.Fatalf("Get = %q, %v; want v", rec.Data, err)
	}
	if err := s.Delete(t.Context(), "adapters_test", id, 0); err != nil {
		t.Fatal(err)
	}
}

func TestOpenBroker(t *testing.T) {
	for _, tc := range []struct {
		name string
		url  func(t *testing.T) string
	}{
		{"memory", func(*testing.T) string { return "memory://" }},
		{"nats+embedded", func(t *testing.T) string { return "nats+embedded://" + t.TempDir() + "?partitions=2" }},
		{"kafka", func(t *testing.T) string {
			c, err := kfake.NewCluster(kfake.NumBrokers(1))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(c.Close)
			return "kafka://" + strings.Join(c.ListenAddrs(), ",") + "?partitions=2"
		}},
		{"nats", func(t *testing.T) string {
			return natsTestURL(t, service(t, "CALF_TEST_NATS_URL", "nats://127.0.0.1:4222")) + "&partitions=2"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := adapters.OpenBroker(t.Context(), tc.url(t), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			roundTrip(t, b)
		})
	}
}

func TestOpenStore(t *testing.T) {
	for _, tc := range []struct {
		name string
		url  func(t *testing.T) string
	}{
		{"memory:", func(*testing.T) string { return "memory:" }},
		{"memory://", func(*testing.T) string { return "memory://" }},
		{"sqlite", func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "x.db") }},
		{"sqlite default", func(t *testing.T) string {
			t.Setenv("XDG_DATA_HOME", t.TempDir())
			return "sqlite:"
		}},
		{"postgres", func(t *testing.T) string {
			return service(t, "CALF_TEST_POSTGRES_URL", "postgres://127.0.0.1:5432/test")
		}},
		{"redis", func(t *testing.T) string { return service(t, "CALF_TEST_REDIS_URL", "redis://127.0.0.1:6379/0") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := adapters.OpenStore(t.Context(), tc.url(t), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			putGet(t, s)
		})
	}
}

// A postgres URL's schema parameter puts the store's tables in that
// schema, created when missing.
func TestOpenStorePostgresSchema(t *testing.T) {
	u := service(t, "CALF_TEST_POSTGRES_URL", "postgres://127.0.0.1:5432/test")
	conn, err := pgx.Connect(t.Context(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	schema := "calf_t" + strings.ToLower(calf.NewID()[:10])
	t.Cleanup(func() { // before the connection closes
		if _, err := conn.Exec(context.Background(), `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	sep := "?"
	if strings.Contains(u, "?") {
		sep = "&"
	}
	s, err := adapters.OpenStore(t.Context(), u+sep+"schema="+schema, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	putGet(t, s)
	var n int
	err = conn.QueryRow(t.Context(), `SELECT count(*) FROM information_schema.tables
		WHERE table_schema = $1 AND table_name = 'calf_records'`, schema).Scan(&n)
	if err != nil || n != 1 {
		t.Errorf("calf_records tables in schema %s: %d, %v; want 1", schema, n, err)
	}
}

func TestInProcess(t *testing.T) {
	for raw, want := range map[string]bool{
		"memory://":              true,
		"nats+embedded:///tmp/x": true,
		"nats://127.0.0.1:4222":  false,
		"kafka://127.0.0.1:9092": false,
		"no scheme":              false,
	} {
		if got := adapters.InProcess(raw); got != want {
			t.Errorf("InProcess(%q) = %t, want %t", raw, got, want)
		}
	}
}
