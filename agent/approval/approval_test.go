package approval_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent/approval"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/store"
	storemem "github.com/calf-go/calf/store/memory"
)

// put stores v under kind and id.
func put(t *testing.T, s store.Store, kind, id string, v any) {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Update(t.Context(), s, kind, id, func([]byte, bool) ([]byte, error) { return data, nil }); err != nil {
		t.Fatal(err)
	}
}

// run is the part of a run's record the package reads.
type run struct {
	RunID  string `json:"run_id"`
	Agent  string `json:"agent"`
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
	Step   int    `json:"step"`
}

// request stores a pending request of the call c1 of the run id.
func request(t *testing.T, s store.Store, id string, expires time.Time) *approval.Approval {
	t.Helper()
	args := json.RawMessage(`{"path":"a.txt"}`)
	a := &approval.Approval{ID: approval.ID(id, "c1"), Agent: "coder", RunID: id, Step: 1, ToolCallID: "c1", ToolName: "write_file",
		ToolKind: "edit", Arguments: args, Digest: approval.Digest("write_file", args), Reason: "asks", Status: approval.Pending,
		RequestedAt: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), ExpiresAt: expires}
	put(t, s, approval.Kind, a.ID, a)
	return a
}

// With only a store, requests are listed as their runs stand and answered
// once, for the arguments shown.
func TestRespondRecordsOnly(t *testing.T) {
	ctx := t.Context()
	s := storemem.New()
	put(t, s, store.KindRun, "r1", run{RunID: "r1", Agent: "coder", Status: "running", Step: 1})
	put(t, s, store.KindRun, "r10", run{RunID: "r10", Agent: "coder", Status: "failed", Error: "the model refused", Step: 1})
	put(t, s, store.KindRun, "r1/c9", run{RunID: "r1/c9", Agent: "helper", Status: "running", Step: 1})
	req := request(t, s, "r1", time.Time{})
	request(t, s, "r10", time.Time{})
	request(t, s, "r1/c9", time.Time{})
	request(t, s, "gone", time.Time{})

	got, err := approval.List(ctx, s, "r1", "")
	if err != nil || len(got) != 2 || got[0].RunID != "r1" || got[1].RunID != "r1/c9" {
		t.Fatalf("List(r1) = %+v, %v; want r1's request and its subagent's, not r10's", got, err)
	}
	cancelled, err := approval.List(ctx, s, "", approval.Cancelled)
	if err != nil || len(cancelled) != 2 {
		t.Fatalf("cancelled = %+v, %v", cancelled, err)
	}
	for _, a := range cancelled {
		if a.RunID == "r10" && !strings.Contains(a.Message, "the model refused") || a.RunID == "gone" && !strings.Contains(a.Message, "is gone") {
			t.Errorf("cancelled %s: %q", a.RunID, a.Message)
		}
	}
	if _, err := approval.Get(ctx, s, "nope/c1"); !errors.Is(err, approval.ErrNotFound) {
		t.Errorf("Get(unknown) = %v", err)
	}

	if _, err := approval.Respond(ctx, s, nil, req.ID, approval.Answer{Approve: true, Digest: "other"}); !errors.Is(err, approval.ErrMismatch) {
		t.Errorf("an answer for other arguments: %v", err)
	}
	if _, err := approval.Respond(ctx, s, nil, req.ID, approval.Answer{Approve: true, ForSession: true, Digest: req.Digest}); err == nil || !strings.Contains(err.Error(), "no session") {
		t.Errorf("for the session of a run in none: %v", err)
	}
	a, err := approval.Respond(ctx, s, nil, req.ID, approval.Answer{Approve: true, Arguments: json.RawMessage(`{"path":"b.txt"}`), Digest: req.Digest})
	if err != nil || a.Status != approval.Approved || string(a.ApprovedArguments) != `{"path":"b.txt"}` || a.AnsweredAt.IsZero() {
		t.Fatalf("Respond = %+v, %v", a, err)
	}
	if stored, err := approval.Get(ctx, s, req.ID); err != nil || stored.Status != approval.Approved {
		t.Errorf("stored: %+v, %v", stored, err)
	}
	if _, err := approval.Respond(ctx, s, nil, req.ID, approval.Answer{Digest: req.Digest}); !errors.Is(err, approval.ErrAnswered) {
		t.Errorf("a second answer: %v", err)
	}
	if a, err := approval.Respond(ctx, s, nil, approval.ID("r10", "c1"), approval.Answer{Approve: true}); !errors.Is(err, approval.ErrRunEnded) || a == nil || a.Status != approval.Cancelled {
		t.Errorf("an answer to a request of an ended run: %+v, %v", a, err)
	}
}

// Expire denies the requests past their time by the client's clock, and
// publishes each denial on the agent's approval channel.
func TestExpirePublishes(t *testing.T) {
	ctx := t.Context()
	s := storemem.New()
	b := memory.New(nil)
	t.Cleanup(func() { _ = b.Close() })
	now := time.Date(2030, 1, 1, 2, 0, 0, 0, time.UTC)
	c := calf.NewClient(b, &calf.Options{Now: func() time.Time { return now }})
	t.Cleanup(func() { _ = c.Close() })
	got := make(chan *calf.Message, 4)
	if err := c.Handle(ctx, approval.Channel("coder"), func(_ context.Context, m *calf.Message) error {
		got <- m
		return nil
	}, &calf.SubscribeOptions{Group: "test"}); err != nil {
		t.Fatal(err)
	}
	put(t, s, store.KindRun, "r1", run{RunID: "r1", Agent: "coder", Status: "running", Step: 1})
	put(t, s, store.KindRun, "r2", run{RunID: "r2", Agent: "coder", Status: "running", Step: 1})
	request(t, s, "r1", now.Add(-time.Minute))
	request(t, s, "r2", now.Add(time.Hour))

	if n, err := approval.Expire(ctx, s, c); n != 1 || err != nil {
		t.Fatalf("Expire = %d, %v; want 1", n, err)
	}
	if n, err := approval.Expire(ctx, s, c); n != 0 || err != nil {
		t.Fatalf("Expire again = %d, %v; want 0", n, err)
	}
	select {
	case m := <-got:
		a, err := approval.Decode(m.Data)
		if err != nil || a.ID != "r1/c1" || a.Status != approval.Denied || m.ID != "r1.approval.c1.answer" || m.Key != "r1" {
			t.Errorf("published %s %s: %+v, %v", m.ID, m.Key, a, err)
		}
	case <-ctx.Done():
		t.Fatal("no denial published")
	}
	if a, err := approval.Get(ctx, s, "r2/c1"); err != nil || a.Status != approval.Pending {
		t.Errorf("the request not due: %+v, %v", a, err)
	}
	if _, err := approval.Respond(ctx, s, c, "r1/c1", approval.Answer{Approve: true}); !errors.Is(err, approval.ErrExpired) {
		t.Errorf("an answer after expiry: %v", err)
	}
}

// failOnce is a broker whose first publish fails.
type failOnce struct {
	calf.Broker
	failed bool
}

func (f *failOnce) Publish(ctx context.Context, m *calf.Message) error {
	if !f.failed {
		f.failed = true
		return errors.New("broker unreachable")
	}
	return f.Broker.Publish(ctx, m)
}

// ExpireRequest denies one request once it is past its time, once; when
// the denial was recorded but not published, calling it again publishes
// it, until the call has its result.
func TestExpireRequest(t *testing.T) {
	ctx := t.Context()
	s := storemem.New()
	put(t, s, store.KindRun, "r1", run{RunID: "r1", Agent: "coder", Status: "running", Step: 1})
	req := request(t, s, "r1", time.Date(2030, 1, 1, 1, 0, 0, 0, time.UTC))
	now := time.Date(2030, 1, 1, 0, 59, 0, 0, time.UTC)
	mb := memory.New(nil)
	defer mb.Close()
	b := &failOnce{Broker: mb}
	c := calf.NewClient(b, &calf.Options{Now: func() time.Time { return now }})
	defer c.Close()
	var heard []string
	if _, err := mb.Subscribe(ctx, approval.Channel("coder"), func(_ context.Context, m *calf.Message) error {
		heard = append(heard, m.ID)
		return nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	if ok, err := approval.ExpireRequest(ctx, s, c, req.ID); ok || err != nil {
		t.Fatalf("before its time: %v, %v", ok, err)
	}
	now = now.Add(time.Minute)
	if ok, err := approval.ExpireRequest(ctx, s, c, req.ID); !ok || err == nil {
		t.Fatalf("at its time, publishing failing: %v, %v", ok, err)
	}
	if a, err := approval.Get(ctx, s, req.ID); err != nil || a.Status != approval.Denied {
		t.Fatalf("after the expiry: %+v, %v", a, err)
	}
	if ok, err := approval.ExpireRequest(ctx, s, c, req.ID); ok || err != nil {
		t.Fatalf("again: %v, %v", ok, err)
	}
	if err := mb.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if len(heard) != 1 || heard[0] != "r1.approval.c1.answer" {
		t.Errorf("published %v, want the denial once", heard)
	}
	if _, err := approval.Respond(ctx, s, c, req.ID, approval.Answer{Approve: true, Digest: req.Digest}); !errors.Is(err, approval.ErrExpired) {
		t.Errorf("an answer after the expiry: %v", err)
	}
}
