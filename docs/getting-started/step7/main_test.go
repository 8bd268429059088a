package main

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

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/adapters"
	"github.com/calf-go/calf/internal/teststores"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/store"
)

// Two workers on the machine's NATS and PostgreSQL serve the agent; a
// caller with a broker connection of its own gets the answer. Skipped when
// NATS (CALF_TEST_NATS_URL, default nats://127.0.0.1:4222) or PostgreSQL
// (CALF_TEST_POSTGRES_URL) is unreachable, unless CALF_TEST_SERVICES is
// set.
func TestWorkersOnNATSAndPostgreSQL(t *testing.T) {
	u := natsTestURL(t)
	st := teststores.Open("guide", teststores.Postgres)[teststores.Postgres](t)
	exercise(t, func() calf.Broker {
		b, err := adapters.OpenBroker(t.Context(), u, nil)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}, st, 2)
}

// The same code on a NATS server embedded in the test and a SQLite file:
// it runs everywhere. The embedded server has one connection, which the
// worker and the caller share.
func TestWorkersEmbedded(t *testing.T) {
	dir := t.TempDir()
	b, err := adapters.OpenBroker(t.Context(), "nats+embedded://"+filepath.Join(dir, "nats"), nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := adapters.OpenStore(t.Context(), "sqlite:"+filepath.Join(dir, "calf.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	exercise(t, func() calf.Broker { return nopClose{b} }, st, 1)
	if err := st.Close(); err != nil {
		t.Error(err)
	}
	if err := b.Close(); err != nil {
		t.Error(err)
	}
}

// exercise starts n workers, asks the agent once, and stops the workers.
func exercise(t *testing.T, openBroker func() calf.Broker, st store.Store, n int) {
	m := modeltest.NewTestModel(
		modeltest.ToolCalls(modeltest.Call("c1", "add", `{"a":2,"b":3}`)),
		modeltest.Text("5"),
	)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	workers, stop := context.WithCancel(ctx)
	done := make(chan error, n)
	for range n {
		b := openBroker()
		defer b.Close()
		w, err := newWorker(workers, m, b, st)
		if err != nil {
			t.Fatal(err)
		}
		go func() { done <- w.Run(workers) }()
	}
	b := openBroker()
	defer b.Close()
	var out strings.Builder
	if err := ask(ctx, m, b, st, "What is 2 + 3?", &out); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != "5\n" {
		t.Errorf("printed %q, want 5", got)
	}
	if got := m.Requests()[1].Messages; len(got) == 0 || got[len(got)-1].Text() != "5" {
		t.Errorf("the model's second call did not see the tool's result 5: %+v", got)
	}
	stop()
	for range n {
		if err := <-done; err != nil {
			t.Errorf("worker: %v", err)
		}
	}
}

// nopClose shares one broker among the test's workers and caller.
type nopClose struct{ calf.Broker }

func (nopClose) Close() error { return nil }

// natsTestURL returns the URL of the machine's NATS server with a stream
// and subject prefix of the test's own, deleted when it ends; it skips the
// test when the server is unreachable, unless CALF_TEST_SERVICES is set.
func natsTestURL(t *testing.T) string {
	t.Helper()
	u := os.Getenv("CALF_TEST_NATS_URL")
	if u == "" {
		u = "nats://127.0.0.1:4222"
	}
	host := u
	if pu, err := url.Parse(u); err == nil && pu.Host != "" {
		host = pu.Host
	}
	conn, err := net.DialTimeout("tcp", host, 2*time.Second)
	if err != nil {
		if os.Getenv("CALF_TEST_SERVICES") != "" {
			t.Fatalf("NATS at %s is unreachable: %v", u, err)
		}
		t.Skipf("NATS at %s is unreachable: %v", u, err)
	}
	_ = conn.Close()
	name := "calfguide" + strings.ToLower(calf.NewID()[:12])
	t.Cleanup(func() {
		nc, err := natsgo.Connect(u)
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
	return u + "?stream=" + name + "&prefix=" + name
}
