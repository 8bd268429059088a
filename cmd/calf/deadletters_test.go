package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/adapters"
	"github.com/calf-go/calf/deadletter"
	"github.com/calf-go/calf/internal/testwait"
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

// calf deadletters replay takes many ids, or a selection, and is
// idempotent.
func TestDeadLettersReplayMany(t *testing.T) {
	isolate(t)
	storeURL := "sqlite:" + filepath.Join(t.TempDir(), "calf.db")
	st, err := adapters.OpenStore(t.Context(), storeURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	record := deadletter.Handler(st)
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	for i, ch := range []string{"calf.agent.calc.inference", "calf.agent.calc.tool_call", "calf.agent.other.input"} {
		m := &calf.Message{ID: fmt.Sprintf("m%d", i+1), Channel: ch, Key: "k", Data: json.RawMessage(`{}`)}
		cause := "load run: connection refused"
		if i == 1 {
			cause = "boom"
		}
		if err := record(t.Context(), calf.NewDeadLetterMessage(m, "workers", errors.New(cause), 5, at.Add(time.Duration(i)*time.Minute))); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()

	brokerURL := kafkaBrokerURL(t)
	b, err := adapters.OpenBroker(t.Context(), brokerURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var mu sync.Mutex
	var got []string
	sub, err := b.Subscribe(t.Context(), "calf.agent.>", func(_ context.Context, m *calf.Message) error {
		mu.Lock()
		got = append(got, m.ID)
		mu.Unlock()
		return nil
	}, &calf.SubscribeOptions{Group: "workers"})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()

	if r := runMain(t.Context(), "", "deadletters", "replay", "--broker", brokerURL, "--store", storeURL); r.code != exitUsage {
		t.Errorf("replay with nothing selected = %+v, want a usage error", r)
	}
	if r := runMain(t.Context(), "", "deadletters", "replay", "--broker", brokerURL, "--store", storeURL, "--all", "deadletter.workers.m1"); r.code != exitUsage {
		t.Errorf("replay with ids and --all = %+v, want a usage error", r)
	}
	// A filter: the calc agent's dead letters whose error says the store
	// was unreachable.
	r := runMain(t.Context(), "", "deadletters", "replay", "--broker", brokerURL, "--store", storeURL, "--agent", "calc", "--error", "connection refused")
	if r.code != exitOK || r.stdout != "replayed deadletter.workers.m1: published m1.replay on calf.agent.calc.inference\n" {
		t.Errorf("replay --agent calc --error ... = %+v", r)
	}
	// --all replays the rest, and says what was replayed before.
	r = runMain(t.Context(), "", "deadletters", "replay", "--broker", brokerURL, "--store", storeURL, "--all")
	if r.code != exitOK || strings.Count(r.stdout, "replayed deadletter.") != 2 || strings.Contains(r.stdout, "m1.replay") {
		t.Errorf("replay --all = %+v", r)
	}
	r = runMain(t.Context(), "", "deadletters", "replay", "--broker", brokerURL, "--store", storeURL, "--all")
	if r.code != exitOK || r.stdout != "no dead letter to replay\n" {
		t.Errorf("replay --all again = %+v", r)
	}
	// Ids: one replayed already, one unknown.
	r = runMain(t.Context(), "", "deadletters", "replay", "--broker", brokerURL, "--store", storeURL, "deadletter.workers.m2", "deadletter.workers.nope")
	if r.code == exitOK || !strings.Contains(r.stdout, "deadletter.workers.m2 was replayed already") || !strings.Contains(r.stdout, "deadletter.workers.nope: not replayed") {
		t.Errorf("replay of a replayed id and an unknown one = %+v", r)
	}
	testwait.For(t, exitWait, "three messages republished", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) >= 3
	})
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(got)
	if want := []string{"m1.replay", "m2.replay", "m3.replay"}; !slices.Equal(got, want) {
		t.Errorf("republished %v, want %v, each once", got, want)
	}
}
