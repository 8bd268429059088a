package deadletter_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/deadletter"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/store"
	storememory "github.com/calf-go/calf/store/memory"
)

// faultStore fails the writes of run state that mention "poison" while it
// is broken, and reports each dead letter written.
type faultStore struct {
	store.Store
	broken   atomic.Bool
	recorded chan string
}

func (s *faultStore) Put(ctx context.Context, kind, id string, data []byte, version int64) (int64, error) {
	if kind == store.KindRun && s.broken.Load() && bytes.Contains(data, []byte("poison")) {
		return 0, errors.New("disk full")
	}
	v, err := s.Store.Put(ctx, kind, id, data, version)
	if err == nil && kind == store.KindDeadLetter && version == 0 {
		s.recorded <- id
	}
	return v, err
}

// echo answers every request with "echo: " and the last user message.
func echo(_ context.Context, req *model.Request) (*model.Response, error) {
	return modeltest.Text("echo: " + req.Messages[len(req.Messages)-1].Text()), nil
}

// A poison message is parked after its attempts, other runs go on, the
// recorder keeps it, and a replay once the fault is fixed completes its run.
func TestPoisonMessageParkedAndReplayed(t *testing.T) {
	b := memory.New(&memory.Options{Backoff: func(int) time.Duration { return time.Millisecond }})
	defer b.Close()
	client := calf.NewClient(b, nil)
	defer client.Close()
	fs := &faultStore{Store: storememory.New(), recorded: make(chan string, 4)}
	fs.broken.Store(true)
	rt := agent.NewRuntime(client, fs, nil)
	a := agent.Must(agent.New("svc", modeltest.FunctionModel(echo), nil))
	const attempts = 3
	if err := a.Serve(t.Context(), rt, &agent.ServeOptions{MaxAttempts: attempts}); err != nil {
		t.Fatal(err)
	}
	if err := deadletter.Serve(t.Context(), client, fs); err != nil {
		t.Fatal(err)
	}

	type result struct {
		out *agent.Output[string]
		err error
	}
	poisoned := make(chan result, 1)
	go func() {
		out, err := a.Run(t.Context(), rt, "poison", nil)
		poisoned <- result{out, err}
	}()

	var id string
	select {
	case id = <-fs.recorded:
	case <-t.Context().Done():
		t.Fatal("no dead letter was recorded")
	}
	// Other runs are unaffected.
	out, err := a.Run(t.Context(), rt, "hello", nil)
	if err != nil || out.Output != "echo: hello" {
		t.Fatalf("the healthy run = %+v, %v", out, err)
	}

	recs, err := deadletter.List(t.Context(), fs)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 {
		t.Fatalf("List returned %d records, want 1", len(recs))
	}
	r := recs[0]
	if r.ID != id || r.Message.Channel != agent.InputChannel("svc") || r.Group != agent.InputChannel("svc") ||
		r.Attempts != attempts || !strings.Contains(r.Error, "disk full") || r.Replayed() {
		t.Errorf("record = %+v", r)
	}
	// The caller of the poisoned run hears of the parked message; the run
	// waits for its replay.
	res := <-poisoned
	if !errors.Is(res.err, agent.ErrRunParked) {
		t.Fatalf("the poisoned run = %+v, %v; want an error matching agent.ErrRunParked", res.out, res.err)
	}
	runID := r.Message.Metadata.RunID
	if st, err := rt.LoadAgentRun(t.Context(), runID); err == nil && st.Status.Terminal() {
		t.Fatalf("the poisoned run ended before its replay: %+v", st)
	}

	// Fix the fault, then replay.
	fs.broken.Store(false)
	got, published, err := deadletter.Replay(t.Context(), b, fs, id, time.Now())
	if err != nil || !published || !got.Replayed() || got.ReplayID != r.Message.ID+".replay" {
		t.Fatalf("Replay = %+v, %t, %v", got, published, err)
	}
	out, err = a.Wait(t.Context(), rt, runID)
	if err != nil {
		t.Fatalf("the replayed run: %v", err)
	}
	if out.Output != "echo: poison" {
		t.Fatalf("the replayed run's output = %q", out.Output)
	}

	// A second replay publishes nothing and returns the same record.
	again, published, err := deadletter.Replay(t.Context(), b, fs, id, time.Now())
	if err != nil || published {
		t.Fatalf("second Replay = %t, %v; want false, nil", published, err)
	}
	if diff := cmp.Diff(got, again); diff != "" {
		t.Errorf("second Replay's record (-first +second):\n%s", diff)
	}
	if _, _, err := deadletter.Replay(t.Context(), b, fs, "no-such-id", time.Now()); !errors.Is(err, deadletter.ErrNotFound) {
		t.Errorf("Replay of an unknown id = %v, want %v", err, deadletter.ErrNotFound)
	}
	if _, err := deadletter.Get(t.Context(), fs, ""); !errors.Is(err, deadletter.ErrNotFound) {
		t.Errorf("Get of an empty id = %v, want %v", err, deadletter.ErrNotFound)
	}
}

// The recorder records a dead letter once: a redelivery after a replay
// keeps the replay mark. A payload that is not a dead letter is recorded
// with its bytes.
func TestHandler(t *testing.T) {
	s := storememory.New()
	h := deadletter.Handler(s)
	orig := &calf.Message{ID: "m1", Channel: "calf.test.work", Key: "k", Data: json.RawMessage(`{"n":1}`)}
	dlm := calf.NewDeadLetterMessage(orig, "workers", errors.New("boom"), 2, time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	if err := h(t.Context(), dlm); err != nil {
		t.Fatal(err)
	}
	b := memory.New(nil)
	defer b.Close()
	if _, _, err := deadletter.Replay(t.Context(), b, s, dlm.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := h(t.Context(), dlm); err != nil {
		t.Fatal(err)
	}
	r, err := deadletter.Get(t.Context(), s, dlm.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Replayed() || r.Error != "boom" || r.Attempts != 2 || r.Group != "workers" || string(r.Message.Data) != `{"n":1}` {
		t.Errorf("record after a redelivery = %+v", r)
	}

	junk := &calf.Message{ID: "deadletter.x.m2", Channel: calf.DeadLetterChannel, Data: json.RawMessage(`[1,2]`), Metadata: calf.Metadata{CausationID: "m2"}}
	if err := h(t.Context(), junk); err != nil {
		t.Fatal(err)
	}
	r, err = deadletter.Get(t.Context(), s, junk.ID)
	if err != nil {
		t.Fatal(err)
	}
	if string(r.RawData) != `[1,2]` || r.Message.ID != "m2" || !strings.Contains(r.Error, "not a calf.DeadLetter") {
		t.Errorf("record of a junk payload = %+v", r)
	}
	if _, _, err := deadletter.Replay(t.Context(), b, s, junk.ID, time.Now()); err == nil || !strings.Contains(err.Error(), "no message to replay") {
		t.Errorf("Replay of a junk record = %v, want an error", err)
	}
}

// TestOfRun: the dead letters of a run and of the runs it started are
// found by the run's id, those of other runs are not, and a replayed one
// is left out.
func TestOfRun(t *testing.T) {
	s := storememory.New()
	h := deadletter.Handler(s)
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	park := func(id, corr string) *calf.Message {
		t.Helper()
		orig := &calf.Message{ID: id, Channel: "calf.test.work", Key: corr, Data: json.RawMessage(`{}`),
			Metadata: calf.Metadata{CorrelationID: corr, RunID: corr}}
		dlm := calf.NewDeadLetterMessage(orig, "calf.agent.a.input", errors.New("boom"), 3, now)
		if err := h(t.Context(), dlm); err != nil {
			t.Fatal(err)
		}
		return dlm
	}
	own := park("r.input", "r")
	child := park("r.1.write.inference.1", "r.1.write")
	park("r2.input", "r2")            // another run whose id starts with "r"
	park("x.input", "")               // no correlation id: not indexed
	replayed := park("r.step.2", "r") // replayed below
	b := memory.New(nil)
	defer b.Close()
	if _, _, err := deadletter.Replay(t.Context(), b, s, replayed.ID, now); err != nil {
		t.Fatal(err)
	}

	recs, err := deadletter.OfRun(t.Context(), s, "r")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		got = append(got, r.ID)
	}
	slices.Sort(got)
	want := []string{own.ID, child.ID}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("OfRun(r) = %q, want %q", got, want)
	}
	// What the recorder received, as agent.ParkedError reads it.
	if err := agent.ParkedError(recs[0].Letter(), agent.RunRef{Name: "a", RunID: "r"}); !errors.Is(err, agent.ErrRunParked) {
		t.Errorf("ParkedError of the letter = %v, want ErrRunParked", err)
	}
	if recs, err := deadletter.OfRun(t.Context(), s, "nobody"); err != nil || len(recs) != 0 {
		t.Errorf("OfRun of a run without dead letters = %v, %v", recs, err)
	}
}
