package agent_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
)

// Callers on separate clients (as in separate processes) each receive their
// own outputs only: nothing reaches a client that did not ask for it.
func TestCallersReceiveOnlyTheirOwnOutputs(t *testing.T) {
	e := newEnv(t, nil)
	a, _, _ := newW1(t, e)
	var clients []*calf.Client
	for range 3 {
		c := calf.NewClient(e.broker, nil)
		t.Cleanup(func() { _ = c.Close() })
		clients = append(clients, c)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 30)
	for i, c := range clients {
		rt := agent.NewRuntime(c, e.store, nil)
		for j := range 10 {
			wg.Go(func() {
				id := fmt.Sprintf("caller%d-run%d", i, j)
				out, err := a.Run(runCtx(t), rt, "add 2 and 3", &agent.RunOptions{RunID: id})
				if err != nil {
					errs <- err
					return
				}
				if out.RunID != id || out.Output != "The sum is 5" {
					errs <- fmt.Errorf("run %s: got %s %q", id, out.RunID, out.Output)
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for i, c := range clients {
		if n := c.OrphanReplies(); n != 0 {
			t.Errorf("client %d received %d outputs of other callers' runs", i, n)
		}
	}
}

// A submitted run answers on its ReplyTo channel with the reference the
// parent gave, and DecodeOutput turns the reply into the typed output.
func TestSubmitRepliesToTheParent(t *testing.T) {
	e := newEnv(t, nil)
	a, _, _ := newW1(t, e)
	failing := agent.Must(agent.New("failing", modeltest.FunctionModel(
		func(context.Context, *model.Request) (*model.Response, error) {
			return nil, errors.New("model is down")
		}), nil))
	if err := failing.Serve(t.Context(), e.rt, nil); err != nil {
		t.Fatal(err)
	}
	replies := make(chan *calf.Message, 4)
	if err := e.client.Handle(t.Context(), "parent.replies", func(_ context.Context, m *calf.Message) error {
		replies <- m
		return nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	ctx := runCtx(t)
	id, err := a.Submit(ctx, e.rt, "add 2 and 3", &agent.RunOptions{
		RunID: "child-1", Parent: "parent-1",
		ReplyTo: &agent.ReplyTo{Channel: "parent.replies", Key: "parent-1", CorrelationID: "parent-1", Ref: "call_7"},
	})
	if err != nil || id != "child-1" {
		t.Fatalf("Submit = %q, %v", id, err)
	}
	var m *calf.Message
	select {
	case m = <-replies:
	case <-ctx.Done():
		t.Fatal("no reply")
	}
	if !strings.HasPrefix(m.ID, "child-1.reply.") || m.Key != "parent-1" || m.Metadata.CorrelationID != "parent-1" || m.Metadata.RunID != "child-1" {
		t.Errorf("reply message: id %s key %s correlation %s run %s", m.ID, m.Key, m.Metadata.CorrelationID, m.Metadata.RunID)
	}
	var ev agent.OutputEvent
	if err := m.Decode(&ev); err != nil {
		t.Fatal(err)
	}
	if ev.Ref != "call_7" || ev.RunID != "child-1" || ev.Agent != "calculator" {
		t.Errorf("reply event: ref %q run %q agent %q", ev.Ref, ev.RunID, ev.Agent)
	}
	out, err := a.DecodeOutput(&ev)
	if err != nil || out != "The sum is 5" {
		t.Errorf("DecodeOutput = %q, %v", out, err)
	}
	st, err := e.rt.LoadState(ctx, "child-1")
	if err != nil || st.Parent != "parent-1" {
		t.Errorf("stored parent = %+v, %v", st, err)
	}

	// A failed run replies too, and its reply decodes to a *RunError.
	in := &agent.InputEvent{Content: "hi", ReplyTo: &agent.ReplyTo{Channel: "parent.replies", Ref: "call_8"}}
	if err := e.rt.Submit(ctx, &agent.SubmitRequest{Run: agent.RunRef{Name: "failing", RunID: "child-2"}, Input: in}); err != nil {
		t.Fatal(err)
	}
	select {
	case m = <-replies:
	case <-ctx.Done():
		t.Fatal("no reply from the failing run")
	}
	ev = agent.OutputEvent{}
	if err := m.Decode(&ev); err != nil {
		t.Fatal(err)
	}
	if _, err := failing.DecodeOutput(&ev); !errors.Is(err, agent.ErrRunFailed) || ev.Ref != "call_8" {
		t.Errorf("failed reply: ref %q, DecodeOutput error %v", ev.Ref, err)
	}

	// Submitting an ended run again with a new ReplyTo answers there.
	again := &agent.InputEvent{Content: "add 2 and 3", ReplyTo: &agent.ReplyTo{Channel: "parent.replies", Ref: "again"}}
	if err := e.rt.Submit(ctx, &agent.SubmitRequest{Run: agent.RunRef{Name: "calculator", RunID: "child-1"}, Input: again}); err != nil {
		t.Fatal(err)
	}
	select {
	case m = <-replies:
	case <-ctx.Done():
		t.Fatal("no reply to the second submission")
	}
	ev = agent.OutputEvent{}
	if err := m.Decode(&ev); err != nil || ev.Ref != "again" || ev.Status != agent.OutputComplete {
		t.Errorf("second reply: %+v, %v", ev, err)
	}

	if err := e.rt.Submit(ctx, &agent.SubmitRequest{Run: agent.RunRef{Name: "bad name", RunID: "x"}, Input: in}); err == nil {
		t.Error("Submit to an invalid agent name succeeded")
	}
}

// A run submitted from a handler does not join the handled run's session.
func TestSubmitFromHandlerHasItsOwnSession(t *testing.T) {
	e := newEnv(t, nil)
	newW1(t, e)
	ctx := calf.ContextWithMessage(runCtx(t), &calf.Message{Metadata: calf.Metadata{RunID: "parent", SessionID: "parent-session"}})
	in := &agent.InputEvent{Content: "add 2 and 3", ReplyTo: &agent.ReplyTo{Channel: "parent.replies"}}
	done := make(chan *calf.Message, 1)
	if err := e.client.Handle(t.Context(), "parent.replies", func(_ context.Context, m *calf.Message) error {
		done <- m
		return nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	if err := e.rt.Submit(ctx, &agent.SubmitRequest{Run: agent.RunRef{Name: "calculator", RunID: "child"}, Input: in}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("no reply")
	}
	st, err := e.rt.LoadState(t.Context(), "child")
	if err != nil || st.SessionID != "" {
		t.Errorf("child run session = %q, %v; want none", st.SessionID, err)
	}
}
