package kafka

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/internal/testwait"
)

// TestPrepareGroupDuringOutage checks that preparing a group while the
// cluster is down fails with an error that calf.IsUnavailable recognizes,
// so that a caller (an agent runtime sending its first run) retries it
// through the outage instead of failing the run, and that it succeeds once
// the cluster is back.
func TestPrepareGroupDuringOutage(t *testing.T) {
	c := newCluster(t)
	b := open(t, c, testOptions())
	if err := b.PrepareGroup(t.Context(), "o.a", "g0"); err != nil {
		t.Fatalf("prepare with the cluster up: %v", err)
	}
	addr := c.ListenAddrs()[0]
	c.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	err := b.PrepareGroup(ctx, "o.b", "g1")
	if err == nil {
		t.Fatal("prepare with the cluster down succeeded")
	}
	t.Logf("prepare with the cluster down: %v", err)
	if !calf.IsUnavailable(err) {
		t.Errorf("prepare with the cluster down: %v (%T); want an error calf.IsUnavailable recognizes", err, err)
	}

	// The cluster comes back on the same address, empty (kfake keeps
	// nothing): the retried preparation succeeds.
	_, portText, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		t.Fatal(err)
	}
	back, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(port))
	if err != nil {
		t.Skipf("the address %s could not be taken again: %v", addr, err)
	}
	t.Cleanup(back.Close)
	testwait.ForErr(t, timeout, "prepare once the cluster is back", func() error {
		err := b.PrepareGroup(t.Context(), "o.b", "g1")
		if err != nil && !calf.IsUnavailable(err) {
			t.Fatalf("prepare once the cluster is back: %v", err)
		}
		return err
	})
}
