package eventlog_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/eventlog"
	"github.com/calf-go/calf/store"
	storemem "github.com/calf-go/calf/store/memory"
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
	s := storemem.New()
	for _, r := range recs {
		if _, err := s.Put(t.Context(), r.Kind, r.ID, r.Data, 0); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// Logs written by an earlier version's recorder are read by this one: in
// order, from the middle, followed to the end of a run and of a chain of
// handoffs; appends go on after the stored events without repeating one,
// and the retention sweep removes them.
func TestStoredRecords(t *testing.T) {
	ctx := t.Context()
	s := storedStore(t, "runs")
	c := calf.NewClient(memory.New(nil), nil)
	t.Cleanup(func() { c.Close() })
	log := eventlog.New(c, s)
	type line struct{ channel, key, id string }
	lines := func(evs []eventlog.Event) []line {
		var out []line
		for _, ev := range evs {
			out = append(out, line{ev.Message.Channel, ev.Message.Key, ev.Message.ID})
		}
		return out
	}
	wantCalc := []line{
		{"calf.agent.calc.input", "run-calc", "run-calc.input"},
		{"calf.agent.calc.inference", "run-calc", "run-calc.inference.1"},
		{"calf.agent.calc.tool_call.add", "run-calc/c1", "run-calc.tool_call.1.c1"},
		{"calf.agent.calc.tool_result", "run-calc", "run-calc.tool_result.1.c1"},
		{"calf.agent.calc.inference", "run-calc", "run-calc.inference.2"},
		{"calf.agent.calc.output", "run-calc", "run-calc.output"},
	}
	wantTriage := []line{
		{"calf.agent.triage.input", "run-triage", "run-triage.input"},
		{"calf.agent.triage.inference", "run-triage", "run-triage.inference.1"},
		{"calf.agent.triage.tool_call.transfer_to_refunds", "run-triage/h1", "run-triage.tool_call.1.h1"},
		{"calf.agent.triage.tool_result", "run-triage", "run-triage.tool_result.1.h1"},
		{"calf.agent.refunds.input", "run-triage.handoff.1", "run-triage.handoff.1.input"},
		{"calf.agent.triage.output", "run-triage", "run-triage.output"},
		{"calf.agent.refunds.inference", "run-triage.handoff.1", "run-triage.handoff.1.inference.1"},
		{"calf.agent.refunds.output", "run-triage.handoff.1", "run-triage.handoff.1.output"},
	}
	equal := func(a, b []line) bool {
		if len(a) != len(b) {
			return false
		}
		for i := range a {
			if a[i] != b[i] {
				return false
			}
		}
		return true
	}

	evs, err := log.Read(ctx, "run-calc", 0, 0)
	if err != nil || !equal(lines(evs), wantCalc) {
		t.Fatalf("Read(run-calc) = %v, %v", lines(evs), err)
	}
	for i, ev := range evs {
		if ev.Log != "run-calc" || ev.Seq != int64(i+1) || ev.Logged.IsZero() || ev.Message.Metadata.CorrelationID != "run-calc" ||
			ev.Message.Metadata.Time.IsZero() || ev.Logged.Before(ev.Message.Metadata.Time) {
			t.Errorf("event %d: %+v", i, ev)
		}
		if l, seq, err := eventlog.ParseID(ev.ID()); err != nil || l != "run-calc" || seq != ev.Seq {
			t.Errorf("ParseID(%s) = %s, %d, %v", ev.ID(), l, seq, err)
		}
	}
	if got := evs[2].Message.Metadata.CausationID; got != "run-calc.inference.1" {
		t.Errorf("the tool call's cause: %q", got)
	}
	var out struct {
		Status  string `json:"status"`
		Content string `json:"content"`
		Steps   int    `json:"steps"`
		Agent   string `json:"agent"`
	}
	if err := json.Unmarshal(evs[5].Message.Data, &out); err != nil || out.Status != "complete" || out.Content != "The sum is 5" || out.Steps != 2 || out.Agent != "calc" {
		t.Errorf("the output's data: %+v, %v", out, err)
	}
	if ended, _ := eventlog.Ended(evs[5], "run-calc"); !ended {
		t.Error("the stored output does not end its log")
	}

	// From the middle, and through the package function.
	if mid, err := eventlog.Read(ctx, s, "run-calc", 3, 2); err != nil || !equal(lines(mid), wantCalc[3:5]) || mid[0].Seq != 4 {
		t.Errorf("Read(run-calc, after 3, 2) = %v, %v", lines(mid), err)
	}

	// Followed to the end of the run, and of the chain it handed off to.
	follow := func(run string, after int64) []eventlog.Event {
		t.Helper()
		fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		var got []eventlog.Event
		for ev, err := range log.FollowRun(fctx, run, after) {
			if err != nil {
				t.Fatalf("FollowRun(%s): %v after %v", run, err, lines(got))
			}
			got = append(got, ev)
		}
		return got
	}
	if got := follow("run-calc", 0); !equal(lines(got), wantCalc) {
		t.Errorf("FollowRun(run-calc) = %v", lines(got))
	}
	if got := follow("run-triage", 0); !equal(lines(got), wantTriage) {
		t.Errorf("FollowRun(run-triage) = %v", lines(got))
	}
	// Resumed after any event, before or past the handoff's output, or
	// after the end: the rest of the chain's events, and the end.
	for after := range len(wantTriage) + 1 {
		if got := follow("run-triage", int64(after)); !equal(lines(got), wantTriage[after:]) {
			t.Errorf("FollowRun(run-triage, after %d) = %v", after, lines(got))
		}
	}
	for after := range len(wantCalc) + 1 {
		if got := follow("run-calc", int64(after)); !equal(lines(got), wantCalc[after:]) {
			t.Errorf("FollowRun(run-calc, after %d) = %v", after, lines(got))
		}
	}

	// Appends continue the stored log and skip what it holds.
	if seq, added, err := log.Append(ctx, "run-calc", &calf.Message{ID: "run-calc.output", Channel: "calf.agent.calc.output", Key: "run-calc"}); err != nil || added || seq != 0 {
		t.Errorf("Append of a stored message = %d, %v, %v; want it skipped", seq, added, err)
	}
	note := &calf.Message{ID: "run-calc.note", Channel: "calf.agent.calc.custom", Key: "run-calc", Data: json.RawMessage(`{"n":1}`),
		Metadata: calf.Metadata{CorrelationID: "run-calc"}}
	if seq, added, err := log.Append(ctx, "run-calc", note); err != nil || !added || seq != 7 {
		t.Errorf("Append after the stored events = %d, %v, %v; want seq 7", seq, added, err)
	}
	if evs, err := log.Read(ctx, "run-calc", 6, 0); err != nil || len(evs) != 1 || evs[0].Message.ID != "run-calc.note" {
		t.Errorf("the appended event: %+v, %v", evs, err)
	}

	// The retention sweep removes the logs.
	logs, records, err := eventlog.Sweep(ctx, s, time.Now().Add(time.Hour))
	if err != nil || logs != 2 || records != len(wantCalc)+1+len(wantTriage) {
		t.Errorf("Sweep = %d logs, %d records, %v", logs, records, err)
	}
	if evs, err := log.Read(ctx, "run-triage", 0, 0); err != nil || len(evs) != 0 {
		t.Errorf("run-triage after the sweep: %v, %v", lines(evs), err)
	}
}
