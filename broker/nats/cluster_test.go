package nats

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/internal/testwait"
)

// testCluster is three NATS servers with JetStream in the process, routed
// to each other on loopback ports outside the ephemeral range (a client
// reconnecting could otherwise take a stopped server's port).
type testCluster struct {
	t      *testing.T
	dirs   [3]string
	ports  [3]int // cluster (route) ports
	client [3]int // client ports
	mu     sync.Mutex
	srvs   [3]*server.Server
}

// freePorts returns n loopback ports, free now, between 20000 and 32000.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var out []int
	base := 20000 + int(time.Now().UnixNano()%10000)
	for p := base; len(out) < n && p < 32000; p++ {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			continue
		}
		_ = l.Close()
		out = append(out, p)
	}
	if len(out) < n {
		t.Fatal("no free ports")
	}
	return out
}

func newTestCluster(t *testing.T) *testCluster {
	t.Helper()
	c := &testCluster{t: t}
	ports := freePorts(t, 6)
	for i := range 3 {
		c.dirs[i] = t.TempDir()
		c.ports[i] = ports[i]
		c.client[i] = ports[3+i]
	}
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range 3 {
		wg.Go(func() { errs[i] = c.start(i) })
	}
	wg.Wait()
	t.Cleanup(func() {
		for i := range 3 {
			c.stop(i)
		}
	})
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	c.waitReady()
	return c
}

func (c *testCluster) start(i int) error {
	var routes []*url.URL
	for j := range 3 {
		if j != i {
			routes = append(routes, &url.URL{Scheme: "nats-route", Host: fmt.Sprintf("127.0.0.1:%d", c.ports[j])})
		}
	}
	srv, err := server.NewServer(&server.Options{
		ServerName: fmt.Sprintf("n%d", i+1),
		Host:       "127.0.0.1", Port: c.client[i],
		JetStream: true, StoreDir: c.dirs[i], NoSigs: true, NoLog: true,
		Cluster: server.ClusterOpts{Name: "calftest", Host: "127.0.0.1", Port: c.ports[i]},
		Routes:  routes,
	})
	if err != nil {
		return err
	}
	srv.Start()
	if !srv.ReadyForConnections(30 * time.Second) {
		srv.Shutdown()
		return fmt.Errorf("server %d did not start", i+1)
	}
	c.mu.Lock()
	c.srvs[i] = srv
	c.mu.Unlock()
	return nil
}

func (c *testCluster) stop(i int) {
	c.mu.Lock()
	srv := c.srvs[i]
	c.srvs[i] = nil
	c.mu.Unlock()
	if srv != nil {
		srv.Shutdown()
		srv.WaitForShutdown()
	}
}

// waitReady waits until JetStream has a meta leader.
func (c *testCluster) waitReady() {
	c.t.Helper()
	testwait.For(c.t, 30*time.Second, "a JetStream leader in the cluster", func() bool {
		c.mu.Lock()
		ok := true
		for _, s := range c.srvs {
			if s != nil && !s.JetStreamIsCurrent() {
				ok = false
			}
		}
		leader := false
		for _, s := range c.srvs {
			if s != nil && s.JetStreamIsLeader() {
				leader = true
			}
		}
		c.mu.Unlock()
		return ok && leader
	})
}

// url returns the client URL of every server, as a worker is given it.
func (c *testCluster) url() string {
	return fmt.Sprintf("nats://127.0.0.1:%d,nats://127.0.0.1:%d,nats://127.0.0.1:%d", c.client[0], c.client[1], c.client[2])
}

// TestClusterWorkersStartTogether starts two workers at the same moment
// on a new stream with three replicas, as a deployment of several workers
// does: both must open their broker and join their group, which then
// counts both. On a cluster, an update of a stream whose creation another
// process has just asked for is never answered, nor is that creation:
// brokers that created or updated the stream blindly both failed here.
func TestClusterWorkersStartTogether(t *testing.T) {
	c := newTestCluster(t)
	for round := range 5 {
		opts := testOptions()
		opts.Replicas = 3
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		var wg sync.WaitGroup
		brokers := make([]*Broker, 2)
		errs := make([]error, 2)
		took := make([]time.Duration, 2)
		start := make(chan struct{})
		for i := range 2 {
			wg.Go(func() {
				<-start
				t0 := time.Now()
				brokers[i], errs[i] = Open(ctx, c.url(), opts)
				if errs[i] == nil {
					_, errs[i] = brokers[i].Subscribe(ctx, "calf.agent.a.input", func(context.Context, *calf.Message) error { return nil }, &calf.SubscribeOptions{Group: "workers"})
				}
				took[i] = time.Since(t0)
			})
		}
		close(start)
		wg.Wait()
		cancel()
		for i, b := range brokers {
			if b != nil {
				t.Cleanup(func() { _ = b.Close() })
			}
			if errs[i] != nil {
				t.Errorf("round %d: broker %d: open after %v: %v", round, i, took[i], errs[i])
			}
		}
		if t.Failed() {
			return
		}
		mctx, cancel := context.WithTimeout(context.Background(), timeout)
		n, err := brokers[0].GroupMembers(mctx, "workers")
		cancel()
		if err != nil || n != 2 {
			t.Fatalf("round %d: GroupMembers = %d, %v; want 2", round, n, err)
		}
		t.Logf("round %d: both started in %v and %v", round, took[0], took[1])
	}
}
