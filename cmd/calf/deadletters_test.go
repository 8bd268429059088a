package main

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/adapters"
	"github.com/calf-go/calf/deadletter"
)

// calf deadletters reads what the recorder wrote, and replays on a shared
// broker (an in-process Kafka cluster here).
func TestDeadLettersCommands(t *testing.T) {
	isolate(t)
	storeURL := "sqlite:" + filepath.Join(t.TempDir(), "calf.db")
	st, err := adapters.OpenStore(t.Context(), storeURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	record := deadletter.Handler(st)
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	first := &calf.Message{ID: "m1", Channel: "calf.test.work", Key: "k1", Data: json.RawMessage(`{"n":1}`)}
	second := &calf.Message{ID: "m2", Channel: "calf.test.work", Key: "k2", Data: json.RawMessage(`not json`)}
	// Recorded out of time order: the list is oldest first.
	for _, dl := range []*calf.Message{
		calf.NewDeadLetterMessage(second, "workers", calf.Permanent(errors.New("does not decode:\nat all")), 1, at.Add(time.Minute)),
		calf.NewDeadLetterMessage(first, "workers", errors.New("database unreachable"), 5, at),
	} {
		if err := record(t.Context(), dl); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()

	list := runMain(t.Context(), "", "deadletters", "list", "--store", storeURL)
	want := "" +
		"ID                     CHANNEL         GROUP    ATTEMPTS  ERROR                    TIME                  REPLAYED\n" +
		"deadletter.workers.m1  calf.test.work  workers  5         database unreachable     2030-01-02T03:04:05Z  -\n" +
		"deadletter.workers.m2  calf.test.work  workers  1         does not decode: at all  2030-01-02T03:05:05Z  -\n"
	if list.code != exitOK || list.stdout != want {
		t.Errorf("calf deadletters list = %d, stderr %q, stdout:\n%s\nwant:\n%s", list.code, list.stderr, list.stdout, want)
	}
	raw := runMain(t.Context(), "", "deadletters", "show", "--raw", "--store", storeURL, "deadletter.workers.m2")
	if raw.code != exitOK || raw.stdout != "not json" {
		t.Errorf("calf deadletters show --raw = %+v, want the original bytes", raw)
	}

	brokerURL := kafkaBrokerURL(t)
	b, err := adapters.OpenBroker(t.Context(), brokerURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	got := make(chan *calf.Message, 4)
	sub, err := b.Subscribe(t.Context(), "calf.test.work", func(_ context.Context, m *calf.Message) error {
		got <- m
		return nil
	}, &calf.SubscribeOptions{Group: "workers"})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	replay := runMain(t.Context(), "", "deadletters", "replay", "--broker", brokerURL, "--store", storeURL, "deadletter.workers.m1")
	if replay.code != exitOK || replay.stdout != "replayed deadletter.workers.m1: published m1.replay on calf.test.work\n" {
		t.Errorf("calf deadletters replay = %+v", replay)
	}
	var m *calf.Message
	select {
	case m = <-got:
	case <-time.After(exitWait):
		t.Fatalf("the replayed message did not arrive within %v", exitWait)
	}
	if m.ID != "m1.replay" || m.Key != "k1" || string(m.Data) != `{"n":1}` {
		t.Errorf("replayed message = %s key %s data %s", m.ID, m.Key, m.Data)
	}
	list = runMain(t.Context(), "", "deadletters", "list", "--store", storeURL)
	lines := strings.Split(list.stdout, "\n")
	if len(lines) < 2 || strings.HasSuffix(lines[1], " -") {
		t.Errorf("after the replay the list does not show it replayed:\n%s", list.stdout)
	}
}
