package eventlog_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/brokertest"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/eventlog"
	"github.com/calf-go/calf/model/modeltest"
	storemem "github.com/calf-go/calf/store/memory"
	"github.com/calf-go/calf/store/sqlite"
	"github.com/calf-go/calf/tool"
)

type addIn struct {
	A int `json:"a"`
	B int `json:"b"`
}

// setup returns a runtime on broker b and a SQLite store, an agent that
// calls add once and answers, served, and the log recording them.
func setup(t *testing.T, b calf.Broker) (*agent.Runtime, *agent.Agent[string], *eventlog.Log) {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "log.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	c := calf.NewClient(b, nil)
	t.Cleanup(func() { _ = c.Close(); _ = b.Close(); _ = st.Close() })
	rt := agent.NewRuntime(c, st, nil)
	add := tool.Must(tool.New("add", "Adds.", func(_ context.Context, in addIn) (int, error) { return in.A + in.B, nil }))
	m := modeltest.NewTestModel(
		modeltest.ToolCalls(modeltest.Call("c1", "add", `{"a":2,"b":3}`)),
		modeltest.Text("The sum is 5"),
		modeltest.ToolCalls(modeltest.Call("c1", "add", `{"a":2,"b":3}`)),
		modeltest.Text("The sum is 5"),
	)
	a := agent.Must(agent.NewText("calc", m, "Add.", add))
	if err := a.Serve(t.Context(), rt, nil); err != nil {
		t.Fatal(err)
	}
	log := eventlog.New(c, st)
	if err := log.Record(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	return rt, a, log
}

// follow collects a log's events after after until the run's end.
func follow(t *testing.T, log *eventlog.Log, id string, after int64) []eventlog.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var got []eventlog.Event
	for ev, err := range log.FollowRun(ctx, id, after) {
		if err != nil {
			t.Fatalf("follow: %v (after %d events)", err, len(got))
		}
		got = append(got, ev)
	}
	return got
}

// checkLog checks that events are numbered from first without gaps, hold
// each message once, and go from the input to the output.
func checkLog(t *testing.T, evs []eventlog.Event, first int64) {
	t.Helper()
	seen := map[string]bool{}
	for i, ev := range evs {
		if ev.Seq != first+int64(i) {
			t.Fatalf("event %d has seq %d, want %d", i, ev.Seq, first+int64(i))
		}
		if seen[ev.Message.ID] {
			t.Errorf("message %s logged twice", ev.Message.ID)
		}
		seen[ev.Message.ID] = true
	}
}

func channels(evs []eventlog.Event) string {
	var cs []string
	for _, ev := range evs {
		cs = append(cs, strings.TrimPrefix(ev.Message.Channel, "calf.agent.calc."))
	}
	return strings.Join(cs, " ")
}

// A run's events are logged once each, in order, even when the broker
// delivers every message twice; following the log from the start and from
// the middle yields the same events as reading it.
func TestRecordFollowResume(t *testing.T) {
	mb := memory.New(nil)
	rt, a, log := setup(t, brokertest.DuplicateDeliveries(mb, 2))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	// Follow before the run starts: the live path.
	live := make(chan []eventlog.Event, 1)
	go func() { live <- follow(t, log, "run-1", 0) }()
	var streamed int
	for _, err := range a.RunStream(ctx, rt, "add 2 and 3", &agent.RunOptions{RunID: "run-1"}) {
		if err != nil {
			t.Fatal(err)
		}
		streamed++
	}
	got := <-live
	checkLog(t, got, 1)
	cs := channels(got)
	if !strings.HasPrefix(cs, "input inference stream stream stream tool_call.add tool_result inference ") || !strings.HasSuffix(cs, " output") || !strings.Contains(cs, "tool_call.add") || !strings.Contains(cs, "tool_result") {
		t.Errorf("channels %q", cs)
	}
	if streamed < len(got) {
		t.Errorf("%d events logged, the run's stream had %d", len(got), streamed)
	}
	// Reading it afterwards, once every delivery is handled, gives the
	// same: nothing more arrives late.
	if err := mb.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	all, err := log.Read(ctx, "run-1", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != len(got) || channels(all) != cs {
		t.Errorf("read %d events %q, followed %d %q", len(all), channels(all), len(got), cs)
	}
	// Resume after event k: the rest, once, in order.
	for _, k := range []int{1, len(all) / 2, len(all) - 1} {
		rest := follow(t, log, "run-1", int64(k))
		checkLog(t, rest, int64(k)+1)
		if channels(rest) != channels(all[k:]) {
			t.Errorf("after %d: %q, want %q", k, channels(rest), channels(all[k:]))
		}
	}
	if page, err := log.Read(ctx, "run-1", 2, 3); err != nil || len(page) != 3 || page[0].Seq != 3 {
		t.Errorf("a page: %v, %v", page, err)
	}
	if ev := all[2]; ev.ID() != "run-1/3" {
		t.Errorf("id %q", ev.ID())
	} else if l, seq, err := eventlog.ParseID(ev.ID()); err != nil || l != "run-1" || seq != 3 {
		t.Errorf("ParseID: %q %d %v", l, seq, err)
	}
	for _, bad := range []string{"", "x", "run/", "run/-1", "/3", "run/x"} {
		if _, _, err := eventlog.ParseID(bad); err == nil {
			t.Errorf("ParseID(%q) took it", bad)
		}
	}
}

// Logs appended by many processes at once hold every message once, numbered
// without gaps.
func TestAppendFromManyProcesses(t *testing.T) {
	st := storemem.New()
	defer st.Close()
	b := memory.New(nil)
	defer b.Close()
	const procs, msgs = 4, 50
	var wg sync.WaitGroup
	errs := make(chan error, procs)
	for p := range procs {
		c := calf.NewClient(b, nil)
		defer c.Close()
		log := eventlog.New(c, st)
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Every process appends every message (a redelivery to
			// another member), in a different order.
			for i := range msgs {
				j := (i*7 + p*13) % msgs
				m := &calf.Message{ID: fmt.Sprintf("m%d", j), Channel: "calf.agent.x.input", Key: "shared", Data: []byte(`{}`)}
				if _, _, err := log.Append(t.Context(), "shared", m); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	c := calf.NewClient(b, nil)
	defer c.Close()
	evs, err := eventlog.New(c, st).Read(t.Context(), "shared", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != msgs {
		t.Fatalf("%d events, want %d", len(evs), msgs)
	}
	checkLog(t, evs, 1)
	// A process that starts later knows the log from the store.
	late := eventlog.New(c, st)
	if seq, added, err := late.Append(t.Context(), "shared", &calf.Message{ID: "m3", Channel: "calf.agent.x.input"}); err != nil || added || seq != 0 {
		t.Errorf("a logged message again: %d %v %v", seq, added, err)
	}
	if seq, added, err := late.Append(t.Context(), "shared", &calf.Message{ID: "new", Channel: "calf.agent.x.input"}); err != nil || !added || seq != msgs+1 {
		t.Errorf("a new message: %d %v %v", seq, added, err)
	}
	if err := late.Delete(t.Context(), "shared"); err != nil {
		t.Fatal(err)
	}
	if recs, err := st.List(t.Context(), eventlog.KindEvent, "", "", 0); err != nil || len(recs) != 0 {
		t.Errorf("after Delete: %d records, %v", len(recs), err)
	}
}

// Follow ends with its context's error.
func TestFollowCancelled(t *testing.T) {
	_, _, log := setup(t, memory.New(nil))
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(20*time.Millisecond, cancel)
	var last error
	for _, err := range log.Follow(ctx, "nothing", 0) {
		last = err
	}
	if !errors.Is(last, context.Canceled) {
		t.Errorf("follow ended with %v", last)
	}
}

// Sweep removes the logs whose last event is older than the cutoff. The
// test runs in a bubble, where the sleeps that put time between the logs
// take none.
func TestSweep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := storemem.New()
		defer st.Close()
		b := memory.New(nil)
		defer b.Close()
		c := calf.NewClient(b, nil)
		defer c.Close()
		log := eventlog.New(c, st)
		add := func(l, id string) {
			if _, _, err := log.Append(t.Context(), l, &calf.Message{ID: id, Channel: "calf.agent.x.input"}); err != nil {
				t.Fatal(err)
			}
		}
		add("old", "o1")
		add("old", "o2")
		time.Sleep(20 * time.Millisecond)
		cut := time.Now()
		time.Sleep(20 * time.Millisecond)
		add("new", "n1")
		logs, recs, err := eventlog.Sweep(t.Context(), st, cut)
		if err != nil || logs != 1 || recs != 2 {
			t.Fatalf("sweep: %d logs, %d records, %v", logs, recs, err)
		}
		if evs, _ := log.Read(t.Context(), "old", 0, 0); len(evs) != 0 {
			t.Errorf("old log: %d events", len(evs))
		}
		if evs, _ := log.Read(t.Context(), "new", 0, 0); len(evs) != 1 {
			t.Errorf("new log: %d events", len(evs))
		}
	})
}
