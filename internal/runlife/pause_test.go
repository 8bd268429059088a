package runlife_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/internal/runlife"
	"github.com/calf-go/calf/store"
	storemem "github.com/calf-go/calf/store/memory"
	"github.com/google/go-cmp/cmp"
)

// record is the record of a run of a kind made for the tests: its step
// starts once Started is set.
type record struct {
	Status      string     `json:"status"`
	Step        int        `json:"step"`
	Started     bool       `json:"started,omitempty"`
	Pause       *pauseMark `json:"pause,omitempty"`
	Resumes     int        `json:"resumes,omitempty"`
	ResumedStep int        `json:"resumed_step,omitempty"`
}

type pauseMark struct {
	Reason      string    `json:"reason"`
	RequestedAt time.Time `json:"requested_at"`
	Step        int       `json:"step,omitempty"`
	PausedAt    time.Time `json:"paused_at,omitzero"`
}

var _ runlife.Stepped[pauseMark] = (*record)(nil)

func (r *record) RunEnded() string {
	if r.Status != "running" {
		return r.Status
	}
	return ""
}
func (r *record) RunStep() int            { return r.Step }
func (r *record) PauseField() **pauseMark { return &r.Pause }
func (r *record) PauseAt(now time.Time) {
	p := *r.Pause
	p.Step, p.PausedAt = r.Step, now
	r.Pause = &p
}
func (r *record) Paused() bool {
	return r.Pause != nil && r.Pause.Step == r.Step && r.Status == "running" && !r.Started
}
func (r *record) CountResume() {
	r.Resumes++
	r.ResumedStep = r.Step
}
func (r *record) ResumeUnsent() bool {
	return r.Resumes > 0 && r.ResumedStep == r.Step && r.Pause == nil && r.Status == "running" && !r.Started
}

func started(r *record) bool { return r.Started }

// ask is a pause asked for reason at t.
func ask(reason string, t time.Time) *pauseMark { return &pauseMark{Reason: reason, RequestedAt: t} }

// runs keeps the test's records in a store.
type runs struct {
	t *testing.T
	s store.Store
}

func newRuns(t *testing.T) *runs {
	s := storemem.New()
	t.Cleanup(func() { _ = s.Close() })
	return &runs{t: t, s: s}
}

const kind = "test_run"

func (rs *runs) put(id string, r *record) {
	rs.t.Helper()
	data, err := json.Marshal(r)
	if err != nil {
		rs.t.Fatal(err)
	}
	if _, err := store.Update(rs.t.Context(), rs.s, kind, id, func([]byte, bool) ([]byte, error) { return data, nil }); err != nil {
		rs.t.Fatal(err)
	}
}

func (rs *runs) get(id string) (*record, int64) {
	rs.t.Helper()
	rec, err := rs.s.Get(rs.t.Context(), kind, id)
	if err != nil {
		rs.t.Fatal(err)
	}
	var r record
	if err := json.Unmarshal(rec.Data, &r); err != nil {
		rs.t.Fatal(err)
	}
	return &r, rec.Version
}

// update is the update of the record id, as a kind writes it.
func (rs *runs) update(id string) runlife.Update[*record] {
	r := runlife.Records[*record]{Store: rs.s, Kind: kind, Decode: func(data []byte) (*record, error) {
		var r record
		return &r, json.Unmarshal(data, &r)
	}}
	return r.Update(id, id)
}

var (
	t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	t1 = t0.Add(time.Minute)
	t2 = t0.Add(2 * time.Minute)
)

func TestPauseOfAnEndedOrUnknownRun(t *testing.T) {
	ctx := t.Context()
	rs := newRuns(t)
	rs.put("done", &record{Status: "completed", Step: 3})
	_, before := rs.get("done")

	if _, err := runlife.Pause(ctx, rs.update("done"), ask("why", t0)); !errors.Is(err, runlife.ErrRunEnded) || !strings.Contains(err.Error(), "with status completed") {
		t.Errorf("pause of an ended run: %v, want ErrRunEnded with its status", err)
	}
	if _, _, err := runlife.Resume(ctx, rs.update("done")); !errors.Is(err, runlife.ErrRunEnded) {
		t.Errorf("resume of an ended run: %v, want ErrRunEnded", err)
	}
	if _, err := runlife.Change(ctx, rs.update("done"), func(*record) (bool, error) {
		t.Error("a change was offered the record of an ended run")
		return true, nil
	}); !errors.Is(err, runlife.ErrRunEnded) {
		t.Errorf("change of an ended run: %v, want ErrRunEnded", err)
	}
	if r, after := rs.get("done"); after != before || r.Pause != nil {
		t.Errorf("the ended run's record was written: version %d -> %d, pause %+v", before, after, r.Pause)
	}

	if _, err := runlife.Pause(ctx, rs.update("nobody"), ask("why", t0)); !errors.Is(err, store.ErrNotFound) || err.Error() != "no run nobody: "+store.ErrNotFound.Error() {
		t.Errorf("pause of an unknown run: %v, want store.ErrNotFound", err)
	}
	if _, _, err := runlife.Resume(ctx, rs.update("nobody")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("resume of an unknown run: %v, want store.ErrNotFound", err)
	}
}

func TestPauseAndResume(t *testing.T) {
	ctx := t.Context()
	rs := newRuns(t)
	rs.put("r", &record{Status: "running", Step: 2})

	// Asked twice: the first pause stands.
	if _, err := runlife.Pause(ctx, rs.update("r"), ask("first", t0)); err != nil {
		t.Fatal(err)
	}
	r, v := rs.get("r")
	if _, err := runlife.Pause(ctx, rs.update("r"), ask("second", t1)); err != nil {
		t.Fatal(err)
	}
	if r2, v2 := rs.get("r"); v2 != v || !cmp.Equal(r2, r) {
		t.Errorf("a second pause changed the record: %s", cmp.Diff(r, r2))
	}
	if r.Paused() || r.Pause.Reason != "first" {
		t.Fatalf("after a pause asked for: %+v", r.Pause)
	}

	// Resumed before it took effect: forgotten, with no resume to send.
	st, send, err := runlife.Resume(ctx, rs.update("r"))
	if err != nil || send || st.Pause != nil || st.Resumes != 0 {
		t.Fatalf("resume of a pause not in effect: send %v, %+v, %v", send, st, err)
	}

	// Asked again, it takes effect before step 2, once.
	if _, err := runlife.Pause(ctx, rs.update("r"), ask("again", t0)); err != nil {
		t.Fatal(err)
	}
	st, paused, err := runlife.TakeEffect(ctx, rs.update("r"), 2, started, t1)
	if err != nil || !paused {
		t.Fatalf("pause taking effect: paused %v, %v", paused, err)
	}
	want := &pauseMark{Reason: "again", RequestedAt: t0, Step: 2, PausedAt: t1}
	if diff := cmp.Diff(want, st.Pause); diff != "" {
		t.Errorf("pause in effect (-want +got):\n%s", diff)
	}
	_, v = rs.get("r")
	if _, paused, err := runlife.TakeEffect(ctx, rs.update("r"), 2, started, t2); err != nil || !paused {
		t.Errorf("pause taking effect again: paused %v, %v", paused, err)
	}
	if r, v2 := rs.get("r"); v2 != v || !r.Pause.PausedAt.Equal(t1) {
		t.Errorf("a pause in effect was recorded again: version %d -> %d, %+v", v, v2, r.Pause)
	}

	// Resumed: counted, with the step it lets go on, and its events to send.
	st, send, err = runlife.Resume(ctx, rs.update("r"))
	if err != nil || !send || st.Pause != nil || st.Resumes != 1 || st.ResumedStep != 2 {
		t.Fatalf("resume of a pause in effect: send %v, %+v, %v", send, st, err)
	}
	// Sent twice (the first one's events may not have been sent): nothing
	// is recorded, and the events are to be sent again, as the same resume.
	_, v = rs.get("r")
	st, send, err = runlife.Resume(ctx, rs.update("r"))
	if err != nil || !send || st.Resumes != 1 {
		t.Fatalf("resume sent twice: send %v, %+v, %v", send, st, err)
	}
	if _, v2 := rs.get("r"); v2 != v {
		t.Errorf("a second resume wrote the record: version %d -> %d", v, v2)
	}
	// Once the step has started, a resume has nothing to send.
	if _, err := runlife.Change(ctx, rs.update("r"), func(r *record) (bool, error) { r.Started = true; return true, nil }); err != nil {
		t.Fatal(err)
	}
	if _, send, err := runlife.Resume(ctx, rs.update("r")); err != nil || send {
		t.Errorf("resume after the step started: send %v, %v", send, err)
	}
	// A pause asked of a step that has started takes effect at the next.
	if _, err := runlife.Pause(ctx, rs.update("r"), ask("later", t2)); err != nil {
		t.Fatal(err)
	}
	if _, paused, err := runlife.TakeEffect(ctx, rs.update("r"), 2, started, t2); err != nil || paused {
		t.Errorf("pause taking effect in a started step: paused %v, %v", paused, err)
	}
	if _, paused, err := runlife.TakeEffect(ctx, rs.update("r"), 3, started, t2); err != nil || paused {
		t.Errorf("pause taking effect before a step the run is not at: paused %v, %v", paused, err)
	}
}

// recorder is a broker that records the ids of what it publishes, and
// refuses, as if unreachable, the publishes to the channels of refuse.
type recorder struct {
	calf.Broker
	mu     sync.Mutex
	ids    []string
	refuse string
}

func (b *recorder) Publish(ctx context.Context, m *calf.Message) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.refuse != "" && m.Channel == b.refuse {
		return calf.Unavailable(errors.New("the broker is unreachable"))
	}
	b.ids = append(b.ids, m.Channel+" "+m.ID)
	return b.Broker.Publish(ctx, m)
}

func (b *recorder) sent() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	ids := slices.Clone(b.ids)
	b.ids = nil
	return ids
}

func TestResumeEventsSend(t *testing.T) {
	ctx := t.Context()
	mb := memory.New(nil)
	b := &recorder{Broker: mb}
	c := calf.NewClient(b, nil)
	t.Cleanup(func() { _ = c.Close(); _ = mb.Close() })
	events := func() *runlife.ResumeEvents {
		return &runlife.ResumeEvents{
			Run: "r", Step: 2, N: 3, Metadata: calf.Metadata{CorrelationID: "r", RunID: "r"},
			PauseChannel: "calf.test.pause", Resume: map[string]int{"step": 2},
			StepChannel: "calf.test.step", EventID: "r.step.2", Event: map[string]int{"step": 2},
		}
	}
	want := []string{"calf.test.pause r.resume.2.3", "calf.test.step r.step.2.resume.3"}

	if err := events().Send(ctx, c); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, b.sent()); diff != "" {
		t.Errorf("sent (-want +got):\n%s", diff)
	}
	// Sent again, under the same ids.
	if err := events().Send(ctx, c); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, b.sent()); diff != "" {
		t.Errorf("sent again (-want +got):\n%s", diff)
	}

	// A resume event refused: the error, and no step event...
	b.refuse = "calf.test.pause"
	if err := events().Send(ctx, c); !calf.IsUnavailable(err) {
		t.Errorf("resume event refused: %v, want the broker's error", err)
	}
	if got := b.sent(); len(got) != 0 {
		t.Errorf("sent after the resume event was refused: %q", got)
	}
	// ...unless Unsent takes it.
	var unsent error
	r := events()
	r.Unsent = func(err error) { unsent = err }
	if err := r.Send(ctx, c); err != nil {
		t.Errorf("resume event refused, with Unsent: %v", err)
	}
	if !calf.IsUnavailable(unsent) {
		t.Errorf("Unsent given %v", unsent)
	}
	if diff := cmp.Diff(want[1:], b.sent()); diff != "" {
		t.Errorf("sent with the resume event refused (-want +got):\n%s", diff)
	}
}

func TestEventIDs(t *testing.T) {
	got := []string{runlife.PauseID("r", 4, 0), runlife.ResumeID("r", 4, 1), runlife.ResumedID("r.inference.4", 1)}
	want := []string{"r.pause.4.0", "r.resume.4.1", "r.inference.4.resume.1"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ids (-want +got):\n%s", diff)
	}
}
