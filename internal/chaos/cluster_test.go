package chaos

import (
	"context"
	"sync"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/broker/nats"
	"github.com/calf-go/calf/internal/testwait"
)

// TestClusterMembersSurviveFailover serves a group on a three-node NATS
// cluster, replicas 3, and kills with SIGKILL, twice, the node that leads
// the bucket of leases, starting it again three seconds later, while a
// third process asks GroupMembers every 50 ms. The group is served
// throughout: it must never be counted empty (an error marked
// calf.Unavailable is the answer while the bucket cannot tell), or a
// caller's start check cancels a run as not served. Electing the bucket's
// next leader takes the cluster 4 to 9 s, longer than a member's
// announcement lasts (2 s): the announcements expired while no member
// could renew them, and the group looked empty until the members
// announced themselves again.
func TestClusterMembersSurviveFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("kills cluster nodes: not with -short")
	}
	nodes, url := startNATSCluster(t)
	ctx := t.Context()
	opts := func() *nats.Options {
		return &nats.Options{Stream: "FAILOVER", Prefix: "failover", Replicas: 3, Partitions: 4}
	}
	for range 2 {
		b, err := nats.Open(ctx, url, opts())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.Close() })
		if _, err := b.Subscribe(ctx, "calf.agent.a.input", func(context.Context, *calf.Message) error { return nil }, &calf.SubscribeOptions{Group: "workers"}); err != nil {
			t.Fatal(err)
		}
	}
	asker, err := nats.Open(ctx, url, opts())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = asker.Close() })
	nc, err := natsgo.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	leader := func() (l *service) {
		testwait.For(t, serviceTimeout, "a leader of the bucket of leases", func() bool {
			actx, cancel := context.WithTimeout(ctx, 2*time.Second)
			st, err := js.Stream(actx, "KV_FAILOVER_leases")
			cancel()
			if err == nil && st.CachedInfo().Cluster != nil {
				for _, n := range nodes {
					if n.name == st.CachedInfo().Cluster.Leader {
						l = n
						return true
					}
				}
			}
			return false
		})
		return l
	}

	var mu sync.Mutex
	var empty, unavailable, asked int
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(50 * time.Millisecond):
			}
			actx, cancel := context.WithTimeout(ctx, 5*time.Second)
			n, err := asker.GroupMembers(actx, "workers")
			cancel()
			mu.Lock()
			asked++
			switch {
			case err != nil && calf.IsUnavailable(err):
				unavailable++
			case err != nil:
				t.Errorf("GroupMembers: %v (not marked unavailable)", err)
			case n == 0:
				if empty == 0 {
					t.Logf("GroupMembers counted the group empty at %s", time.Now().Format("15:04:05.000"))
				}
				empty++
			}
			mu.Unlock()
		}
	})
	for kill := range 2 {
		n := leader()
		t.Logf("kill %d at %s: %s, the leader of the bucket of leases", kill+1, time.Now().Format("15:04:05.000"), n.name)
		if err := n.down("kill"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * time.Second) // the node's outage
		if err := n.start(ctx); err != nil {
			t.Fatal(err)
		}
		// The failover is over once the bucket has a leader and both
		// other replicas are current again; the members then announce
		// themselves within an announcement's life (2 s). The group is
		// asked 40 more times after that, at 50 ms or more apart.
		testwait.For(t, serviceTimeout, "the bucket of leases to recover from the kill", func() bool {
			actx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			st, err := js.Stream(actx, "KV_FAILOVER_leases")
			if err != nil {
				return false
			}
			cl := st.CachedInfo().Cluster
			if cl == nil || cl.Leader == "" || len(cl.Replicas) != 2 {
				return false
			}
			for _, r := range cl.Replicas {
				if !r.Current || r.Offline {
					return false
				}
			}
			return true
		})
		mu.Lock()
		after := asked
		mu.Unlock()
		testwait.For(t, serviceTimeout, "40 answers after the recovery", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return asked >= after+40
		})
	}
	close(done)
	wg.Wait()
	t.Logf("GroupMembers asked %d times: %d empty, %d unavailable", asked, empty, unavailable)
	if empty > 0 {
		t.Errorf("a served group was counted empty %d times", empty)
	}
}
