package deadletter_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/deadletter"
	"github.com/calf-go/calf/store"
	storememory "github.com/calf-go/calf/store/memory"
)

// storedRecord is a record of testdata/records: kind, id and data as an
// earlier version wrote them; see testdata/records/README.md.
type storedRecord struct {
	Kind string          `json:"kind"`
	ID   string          `json:"id"`
	Data json.RawMessage `json:"data"`
}

// storedStore is a memory store holding the records of the fixture name.
func storedStore(t *testing.T, name string) store.Store {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "records", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var recs []storedRecord
	if err := json.Unmarshal(data, &recs); err != nil {
		t.Fatal(err)
	}
	s := storememory.New()
	for _, r := range recs {
		if _, err := s.Put(t.Context(), r.Kind, r.ID, r.Data, 0); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// Dead letters recorded by an earlier version are read by this one: listed,
// selected, found by their run, and the one not yet replayed is replayed
// here, republishing the original message; the replayed one is swept.
func TestStoredRecords(t *testing.T) {
	ctx := t.Context()
	s := storedStore(t, "parked")
	const (
		input = "deadletter.calf.agent.svc.input.run-1.input"
		fetch = "deadletter.workers.job-1"
		raw   = "deadletter.workers.job-raw"
	)
	ids := func(recs []*deadletter.Record) []string {
		var out []string
		for _, r := range recs {
			out = append(out, r.ID)
		}
		return out
	}

	all, err := deadletter.List(ctx, s)
	if err != nil || !slices.Equal(ids(all), []string{input, fetch, raw}) {
		t.Fatalf("List = %q, %v", ids(all), err)
	}
	in, done, junk := all[0], all[1], all[2]
	if m := in.Message; m == nil || m.ID != "run-1.input" || m.Channel != "calf.agent.svc.input" || m.Key != "run-1" ||
		compactJSON(t, m.Data) != `{"prompt":"poison"}` ||
		m.Metadata.CorrelationID != "run-1" || m.Metadata.RunID != "run-1" || m.Metadata.Time.IsZero() {
		t.Errorf("the input's message: %+v", in.Message)
	}
	if in.Group != "calf.agent.svc.input" || in.Error != "the model refused" || in.Attempts != 1 || !in.Permanent ||
		in.Time.IsZero() || in.Replayed() || in.ReplayID != "" || len(in.RawData) != 0 {
		t.Errorf("the input's dead letter: %+v", in)
	}
	if m := done.Message; m == nil || m.ID != "job-1" || m.Channel != "calf.jobs.fetch" || compactJSON(t, m.Data) != `{"url":"https://example.com"}` ||
		m.Metadata.CorrelationID != "run-1.2.fetch" {
		t.Errorf("the replayed one's message: %+v", done.Message)
	}
	if done.Group != "workers" || done.Error != "database unreachable" || done.Attempts != 2 || done.Permanent || !done.Replayed() ||
		!done.ReplayedAt.Equal(time.Date(2026, 12, 7, 6, 30, 0, 0, time.UTC)) || done.ReplayID != "job-1.replay" {
		t.Errorf("the replayed one: %+v", done)
	}
	if junk.Message == nil || junk.Message.ID != "job-raw" || junk.Message.Channel != "calf.jobs.raw" || len(junk.Message.Data) != 0 ||
		string(junk.RawData) != "not json" || junk.Attempts != 2 || junk.Replayed() {
		t.Errorf("the one whose data is not JSON: %+v", junk)
	}
	if got, err := deadletter.Get(ctx, s, fetch); err != nil || got.ReplayID != "job-1.replay" || got.ID != fetch {
		t.Errorf("Get(%s) = %+v, %v", fetch, got, err)
	}

	// Selected and found by their run as stored.
	if got, err := deadletter.OfRun(ctx, s, "run-1"); err != nil || !slices.Equal(ids(got), []string{input}) {
		t.Errorf("OfRun(run-1) = %q, %v; want the input only (the other was replayed)", ids(got), err)
	}
	if got, err := deadletter.Select(ctx, s, deadletter.Filter{Agent: "svc"}); err != nil || !slices.Equal(ids(got), []string{input}) {
		t.Errorf("Select(agent svc) = %q, %v", ids(got), err)
	}
	if got, err := deadletter.Select(ctx, s, deadletter.Filter{Channel: "calf.jobs.*", Replayed: true}); err != nil || !slices.Equal(ids(got), []string{fetch, raw}) {
		t.Errorf("Select(calf.jobs.*, replayed too) = %q, %v", ids(got), err)
	}
	if got, err := deadletter.Select(ctx, s, deadletter.Filter{Error: "unreachable"}); err != nil || !slices.Equal(ids(got), []string{raw}) {
		t.Errorf("Select(error) = %q, %v", ids(got), err)
	}
	if err := agent.ParkedError(in.Letter(), agent.RunRef{Name: "svc", RunID: "run-1"}); !errors.Is(err, agent.ErrRunParked) {
		t.Errorf("ParkedError of the stored letter = %v, want ErrRunParked", err)
	}

	// Replayed here: the original messages come back on their channels.
	b := memory.New(nil)
	defer b.Close()
	c := calf.NewClient(b, nil)
	defer c.Close()
	got := make(chan *calf.Message, 4)
	for _, ch := range []string{"calf.agent.svc.input", "calf.jobs.>"} {
		if err := c.Handle(ctx, ch, func(_ context.Context, m *calf.Message) error {
			got <- m
			return nil
		}, &calf.SubscribeOptions{Group: "fixture." + ch}); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	outs := deadletter.ReplayMany(ctx, b, s, []string{input, fetch, raw}, now)
	if len(outs) != 3 || outs[0].Err != nil || !outs[0].Published || outs[1].Err != nil || outs[1].Published || outs[2].Err != nil || !outs[2].Published {
		t.Fatalf("ReplayMany = %+v", outs)
	}
	if r := outs[0].Record; !r.ReplayedAt.Equal(now) || r.ReplayID != "run-1.input.replay" {
		t.Errorf("the input, replayed: %+v", r)
	}
	if r := outs[1].Record; !r.ReplayedAt.Equal(time.Date(2026, 12, 7, 6, 30, 0, 0, time.UTC)) {
		t.Errorf("the one replayed before, after ReplayMany: %+v", r)
	}
	byID := map[string]*calf.Message{}
	for len(byID) < 2 {
		select {
		case m := <-got:
			byID[m.ID] = m
		case <-time.After(10 * time.Second):
			t.Fatalf("replayed messages received: %v", byID)
		}
	}
	if m := byID["run-1.input.replay"]; m == nil || m.Channel != "calf.agent.svc.input" || m.Key != "run-1" ||
		compactJSON(t, m.Data) != `{"prompt":"poison"}` || m.Metadata.CorrelationID != "run-1" {
		t.Errorf("the input republished: %+v", m)
	}
	if m := byID["job-raw.replay"]; m == nil || m.Channel != "calf.jobs.raw" || string(m.Data) != "not json" {
		t.Errorf("the raw one republished: %+v", m)
	}
	if got, err := deadletter.OfRun(ctx, s, "run-1"); err != nil || len(got) != 0 {
		t.Errorf("OfRun(run-1) after the replay = %q, %v", ids(got), err)
	}

	// The one replayed by the earlier version is swept with its index entry.
	runs, records, err := deadletter.Sweep(ctx, s, now)
	if err != nil || runs != 1 || records < 2 {
		t.Errorf("Sweep = %d, %d, %v; want the stored replayed one and its index entry", runs, records, err)
	}
	if _, err := deadletter.Get(ctx, s, fetch); !errors.Is(err, deadletter.ErrNotFound) {
		t.Errorf("Get(%s) after the sweep = %v", fetch, err)
	}
	if idx, err := s.List(ctx, store.KindDeadLetterRun, "run-1.2.fetch/", "", 0); err != nil || len(idx) != 0 {
		t.Errorf("the swept one's index entry: %+v, %v", idx, err)
	}
}

// compactJSON returns data compacted: the fixtures hold their records'
// JSON indented.
func compactJSON(t *testing.T, data []byte) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, data); err != nil {
		t.Fatalf("%s: %v", data, err)
	}
	return b.String()
}
