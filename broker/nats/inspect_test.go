package nats

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	natsgo "github.com/nats-io/nats.go"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/internal/testwait"
)

func TestGroupMembers(t *testing.T) {
	b, srv, err := openOnServer(t.Context(), t.TempDir(), &Options{Partitions: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	count := func() int {
		t.Helper()
		n, err := b.GroupMembers(t.Context(), "g")
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(); n != 0 {
		t.Fatalf("members of a group nobody joined: %d", n)
	}
	sub, err := b.Subscribe(t.Context(), "a.b", func(context.Context, *calf.Message) error { return nil }, &calf.SubscribeOptions{Group: "g"})
	if err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "a member counted", func() bool { return count() > 0 })
	if n := count(); n != 1 {
		t.Fatalf("a group with one member has %d", n)
	}
	// A second member, in another broker (another process), counts too.
	nc, err := natsgo.Connect("", natsgo.InProcessServer(srv))
	if err != nil {
		t.Fatal(err)
	}
	b2, err := open(t.Context(), nc, withDefaults(&Options{Partitions: 2}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b2.Close() })
	sub2, err := b2.Subscribe(t.Context(), "a.b", func(context.Context, *calf.Message) error { return nil }, &calf.SubscribeOptions{Group: "g"})
	if err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "two members counted", func() bool { return count() >= 2 })
	if n := count(); n != 2 {
		t.Fatalf("a group with two members has %d", n)
	}
	if err := sub2.Close(); err != nil {
		t.Fatal(err)
	}
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	// The durable consumers stay; the closed member's pull requests end.
	testwait.ForErr(t, 15*time.Second, "no member counted after the only one left", func() error {
		if n := count(); n != 0 {
			return fmt.Errorf("%d members", n)
		}
		return nil
	})
}

// TestMembersAfterServerRestart restarts a single server (no cluster, so
// no leader to show the change) under a group's live member, down longer
// than an announcement lasts, while another broker asks GroupMembers
// every 20 ms: the member is alive throughout, so the answer must never
// be zero. Right after the restart the member's announcement had expired
// and its pull requests were gone, and the group looked empty: a caller's
// start check cancelled a run as not served.
func TestMembersAfterServerRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("restarts a server: not with -short")
	}
	dir := t.TempDir()
	port := freePorts(t, 1)[0]
	var mu sync.Mutex
	var srv *server.Server
	start := func() {
		t.Helper()
		s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: dir, NoSigs: true, NoLog: true})
		if err != nil {
			t.Fatal(err)
		}
		s.Start()
		if !s.ReadyForConnections(30 * time.Second) {
			t.Fatal("the server did not start")
		}
		mu.Lock()
		srv = s
		mu.Unlock()
	}
	stop := func() {
		mu.Lock()
		s := srv
		srv = nil
		mu.Unlock()
		if s != nil {
			s.Shutdown()
			s.WaitForShutdown()
		}
	}
	start()
	t.Cleanup(stop)
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	// The member comes back a second after the inspector, as a worker
	// may after a caller (reconnections are spread out).
	opts := func(wait time.Duration) *Options {
		return &Options{Stream: "RESTART", Prefix: "restart", Partitions: 2, PublishTimeout: time.Second,
			ConnectOptions: []natsgo.Option{natsgo.ReconnectWait(wait), natsgo.ReconnectJitter(0, 0)}}
	}
	member, err := Open(t.Context(), url, opts(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = member.Close() })
	inspector, err := Open(t.Context(), url, opts(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = inspector.Close() })
	if _, err := member.Subscribe(t.Context(), "restart.x", func(context.Context, *calf.Message) error { return nil },
		&calf.SubscribeOptions{Group: "g"}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "the member counted before the restart", func() bool {
		n, err := inspector.GroupMembers(t.Context(), "g")
		return err == nil && n == 1
	})

	stop()
	time.Sleep(3 * leaseTTL(0)) // down: the announcement expires
	start()
	// Ask until the member has been counted again for a while.
	counted := 0
	testwait.For(t, 30*time.Second, "the member counted again 20 times after the restart", func() bool {
		n, err := inspector.GroupMembers(t.Context(), "g")
		switch {
		case err == nil && n == 0:
			t.Fatal("a group whose member is alive was counted empty after the server restarted")
		case err == nil:
			counted++
		case !errors.Is(err, calf.ErrUnavailable):
			t.Fatalf("GroupMembers after the restart: %v, want a count or an error marked unavailable", err)
		}
		return counted >= 20
	})
}
