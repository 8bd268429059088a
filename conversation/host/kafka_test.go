package host_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/calf-go/calf/broker/kafka"
	"github.com/calf-go/calf/conversation/host"
	"github.com/calf-go/calf/internal/testwait"
	storemem "github.com/calf-go/calf/store/memory"
)

// TestHostStopDeletesTopicsOnKafka: the seed's flow on Kafka (kfake), a
// topic per channel; stopping the conversation deletes the topics of its
// channels.
func TestHostStopDeletesTopicsOnKafka(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	b, err := kafka.Open(t.Context(), cluster.ListenAddrs(), &kafka.Options{Partitions: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	e := newHost(t, b, storemem.New(), docmemModel(), &host.Options{DeleteChannels: true})
	c := e.create()
	e.say(c, "Create a docmem called project-notes")
	if got := e.wait(c, 1)[0]; got.Message != "I've created the docmem 'project-notes' for you." {
		t.Fatalf("answer %+v", got)
	}
	convTopics := func() []string {
		t.Helper()
		// A client of its own for each listing: a client answers from
		// the metadata it has cached for a while.
		cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		td, err := kadm.NewClient(cl).ListTopics(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, name := range td.Names() {
			if strings.Contains(name, c.ID) {
				names = append(names, name)
			}
		}
		return names
	}
	if got := convTopics(); len(got) != 4 {
		t.Fatalf("the conversation's topics before the stop: %q", got)
	}
	if _, err := e.host.Stop(t.Context(), c.ID); err != nil {
		t.Fatal(err)
	}
	// The deletion may take a moment to show in the listing.
	testwait.ForErr(t, 10*time.Second, "the conversation's topics to go", func() error {
		if got := convTopics(); len(got) != 0 {
			return fmt.Errorf("topics after the stop: %q", got)
		}
		return nil
	})
}
