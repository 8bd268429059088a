package a2a

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"time"

	spec "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/runner"
)

// keyedHandler makes the messages that start a task idempotent: a
// message's id (messageId, which A2A has the message's sender create,
// unique to the message) is the idempotency key of its task. The same
// message sent again, within the runtime's idempotency window, gets the
// task (and the run) the first one started, and its answer; another
// message under a message id in use is refused (invalid params). A
// message that continues a task (its taskId set) goes on as the SDK
// handles it.
type keyedHandler struct {
	a2asrv.RequestHandler
	s *Server
}

// settleGrace is how long an answer for a message sent again waits, once
// the run has ended, for the process that carries the task to store its
// end, before the task is brought up to date from the run.
const settleGrace = time.Second

// claim returns the task that req's message id names, and whether this
// request is the one to carry it out; a nil task for a message that is
// not keyed.
func (h *keyedHandler) claim(ctx context.Context, req *spec.SendMessageRequest) (*spec.Task, bool, error) {
	if req == nil || req.Message == nil || req.Message.ID == "" || req.Message.TaskID != "" ||
		len(req.Message.Parts) == 0 || req.Message.Role == "" {
		return nil, false, nil // continues a task, or is refused by the SDK
	}
	m := req.Message
	request, err := json.Marshal(struct {
		Tenant  string        `json:"tenant,omitempty"`
		Message *spec.Message `json:"message"`
	}{req.Tenant, m})
	if err != nil {
		return nil, false, err
	}
	fresh := string(spec.NewTaskID())
	id, err := h.s.rt.RunForKey(ctx, "a2a/"+h.s.r.Name(), m.ID, request, fresh)
	if errors.Is(err, agent.ErrIdempotencyConflict) {
		return nil, false, spec.NewError(spec.ErrInvalidParams,
			fmt.Sprintf("messageId %q was sent before with another message: a new message needs a new messageId", m.ID)).
			WithDetails(map[string]any{"reason": "IDEMPOTENCY_CONFLICT", "messageId": m.ID})
	}
	if err != nil {
		return nil, false, err
	}
	// The task is created here, with the message in its history, so that
	// its id is the key's: the SDK then carries out the stored task.
	msg := *m
	msg.TaskID = spec.TaskID(id)
	if msg.ContextID == "" {
		msg.ContextID = spec.NewContextID()
	}
	now := time.Now()
	task := &spec.Task{ID: msg.TaskID, ContextID: msg.ContextID, History: []*spec.Message{&msg},
		Status: spec.TaskStatus{State: spec.TaskStateSubmitted, Timestamp: &now}}
	_, err = (&taskStore{s: h.s}).Create(ctx, task)
	switch {
	case err == nil:
		return task, true, nil
	case errors.Is(err, taskstore.ErrTaskAlreadyExists):
		return task, false, nil // sent before: answered from its task
	}
	return nil, false, err
}

// carry returns req for the task that claim created.
func carry(req *spec.SendMessageRequest, task *spec.Task) *spec.SendMessageRequest {
	r := *req
	r.Message = task.History[0]
	return &r
}

// SendMessage answers a message sent again with its task.
func (h *keyedHandler) SendMessage(ctx context.Context, req *spec.SendMessageRequest) (spec.SendMessageResult, error) {
	task, fresh, err := h.claim(ctx, req)
	switch {
	case err != nil:
		return nil, err
	case task == nil:
		return h.RequestHandler.SendMessage(ctx, req)
	case fresh:
		return h.RequestHandler.SendMessage(ctx, carry(req, task))
	}
	if req.Config == nil || !req.Config.ReturnImmediately {
		for _, err := range h.follow(ctx, task.ID) {
			if err != nil {
				return nil, err
			}
		}
	}
	return h.RequestHandler.GetTask(ctx, &spec.GetTaskRequest{ID: task.ID, HistoryLength: historyLength(req)})
}

// SendStreamingMessage answers a message sent again with its task's
// events, from when it is followed, or with the task once it has ended.
func (h *keyedHandler) SendStreamingMessage(ctx context.Context, req *spec.SendMessageRequest) iter.Seq2[spec.Event, error] {
	return func(yield func(spec.Event, error) bool) {
		task, fresh, err := h.claim(ctx, req)
		switch {
		case err != nil:
			yield(nil, err)
			return
		case task == nil:
			for ev, err := range h.RequestHandler.SendStreamingMessage(ctx, req) {
				if !yield(ev, err) {
					return
				}
			}
			return
		case fresh:
			// The task first, as a new task's stream starts.
			if !yield(task, nil) {
				return
			}
			for ev, err := range h.RequestHandler.SendStreamingMessage(ctx, carry(req, task)) {
				if !yield(ev, err) {
					return
				}
			}
			return
		}
		for ev, err := range h.follow(ctx, task.ID) {
			if !yield(ev, err) || err != nil {
				return
			}
		}
		t, err := h.RequestHandler.GetTask(ctx, &spec.GetTaskRequest{ID: task.ID, HistoryLength: historyLength(req)})
		yield(t, err)
	}
}

func historyLength(req *spec.SendMessageRequest) *int {
	if req.Config == nil {
		return nil
	}
	return req.Config.HistoryLength
}

// follow yields the events of the task id's execution in this process,
// if any, until it ends; then it waits until the task's end (or its wait
// for input) is stored, or its run has ended (or waits) and the grace has
// passed. It yields ctx's error when ctx ends first.
func (h *keyedHandler) follow(ctx context.Context, id spec.TaskID) iter.Seq2[spec.Event, error] {
	return func(yield func(spec.Event, error) bool) {
		for ev, err := range h.RequestHandler.SubscribeToTask(ctx, &spec.SubscribeToTaskRequest{ID: id}) {
			if err != nil {
				break // no execution here
			}
			if _, ok := ev.(*spec.Task); ok {
				continue // the task itself is the answer's end
			}
			if !yield(ev, nil) {
				return
			}
		}
		// The execution's last events may be on their way to the store:
		// the task is brought up to date from its run only when they do
		// not come.
		ts := &taskStore{s: h.s}
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		var ended time.Time
		for {
			if st, _ := ts.stored(ctx, id); st != nil && (st.Status.State.Terminal() || st.Status.State == spec.TaskStateInputRequired) {
				return
			}
			if ended.IsZero() {
				if res, err := h.s.r.Status(ctx, h.s.rt, string(id)); err == nil && (res.Status.Ended() || res.Status == runner.Waiting) {
					ended = time.Now()
				}
			} else if time.Since(ended) > settleGrace {
				return // the task is brought up to date from its run
			}
			select {
			case <-ctx.Done():
				yield(nil, ctx.Err())
				return
			case <-tick.C:
			}
		}
	}
}

// stored returns the task id as stored, without bringing it up to date
// from its run; nil when there is none.
func (ts *taskStore) stored(ctx context.Context, id spec.TaskID) (*spec.Task, error) {
	rec, err := ts.st().Get(ctx, KindTask, string(id))
	if err != nil {
		return nil, err
	}
	var st storedTask
	if err := json.Unmarshal(rec.Data, &st); err != nil {
		return nil, err
	}
	return st.Task, nil
}
