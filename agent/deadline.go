package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/store"
)

// DeadlineChannel starts the channels of the events of runs' deadlines,
// one per kind of run: "calf.runs.deadline.{kind}". A durable timer per
// run with a deadline ([Runtime.StartDeadline]) emits one there when the
// deadline passes, and a process that serves timers and knows the kind
// (an agent's always; a team's or a workflow's once served, see
// [Runtime.AddKind]) cancels the run if it has not ended.
const DeadlineChannel = "calf.runs.deadline"

// deadlineChannel returns the channel of the deadlines of runs of kind.
func deadlineChannel(kind string) string { return DeadlineChannel + "." + kind }

// deadlineSubs are the kinds whose deadlines this process handles.
type deadlineSubs struct {
	mu   sync.Mutex
	ctx  context.Context // set once timers are served
	done map[string]bool
}

// deadlineEvent is the payload of a deadline's event.
type deadlineEvent struct {
	Run      RunRef    `json:"run"`
	Deadline time.Time `json:"deadline"`
}

// deadlineTimer is the id of the timer of a run's deadline.
func deadlineTimer(run RunRef) string {
	return "deadline/" + run.Kind + "/" + run.Name + "/" + run.RunID
}

// StartDeadline ends the run that run names, of any kind, at the time
// at, unless it has ended by then: a durable timer that survives
// restarts, whichever process serves timers when it is due cancels the
// run with the reason "timed out: ...", wherever it waits (for an
// approval, a signal, a sleep, a resume, a slot under flow control). It
// is for the packages of runners (team, workflow): an agent's run with a
// deadline ([RunOptions.Deadline]) has its timer started when the run
// starts. Starting it again changes nothing.
func (rt *Runtime) StartDeadline(ctx context.Context, run RunRef, at time.Time) error {
	if rt == nil {
		return ErrNoRuntime
	}
	if at.IsZero() {
		return nil
	}
	if run.Kind == "" {
		run.Kind = "agent"
	}
	data, err := json.Marshal(deadlineEvent{Run: run, Deadline: at})
	if err != nil {
		return err
	}
	_, err = rt.StartTimer(ctx, Timer{
		ID: deadlineTimer(run), Due: at, Channel: deadlineChannel(run.Kind), Data: data, Key: run.RunID,
		EventID:  run.RunID + ".deadline",
		Metadata: calf.Metadata{CorrelationID: run.RunID, RunID: run.RunID},
	})
	if err != nil {
		return fmt.Errorf("%s %s: the deadline of run %s: %w", run.Kind, run.Name, run.RunID, err)
	}
	return nil
}

// serveDeadlines has this process handle the deadlines of the runs of
// every kind it knows, from now on (see subscribeDeadlines).
func (rt *Runtime) serveDeadlines(ctx context.Context) {
	rt.deadlines.mu.Lock()
	rt.deadlines.ctx = ctx
	rt.deadlines.mu.Unlock()
	rt.kindMu.Lock()
	kinds := []string{"agent"}
	for name := range rt.kinds {
		kinds = append(kinds, name)
	}
	rt.kindMu.Unlock()
	rt.subscribeDeadlines(kinds...)
}

// subscribeDeadlines subscribes this process to the deadlines of the
// runs of kinds, once each, if it serves timers.
func (rt *Runtime) subscribeDeadlines(kinds ...string) {
	for _, kind := range kinds {
		rt.deadlines.mu.Lock()
		ctx := rt.deadlines.ctx
		if ctx == nil || rt.deadlines.done[kind] {
			rt.deadlines.mu.Unlock()
			continue
		}
		if rt.deadlines.done == nil {
			rt.deadlines.done = map[string]bool{}
		}
		rt.deadlines.done[kind] = true
		rt.deadlines.mu.Unlock()
		ch := deadlineChannel(kind)
		err := calf.CreateChannels(ctx, rt.client.Broker(), ch)
		if err == nil {
			err = rt.client.Handle(ctx, ch, rt.onDeadline, &calf.SubscribeOptions{Group: ch})
		}
		if err != nil {
			rt.log.Error("agent: serve the deadlines of runs", "kind", kind, "err", err)
		}
	}
}

// onDeadline cancels the run whose deadline passed, unless it has ended.
func (rt *Runtime) onDeadline(ctx context.Context, msg *calf.Message) error {
	var ev deadlineEvent
	if err := msg.Decode(&ev); err != nil {
		return calf.Permanent(err)
	}
	_, err := rt.Cancel(ctx, ev.Run, deadlineReason(ev.Deadline))
	switch {
	case err == nil, errors.Is(err, ErrRunEnded):
		return nil
	case errors.Is(err, store.ErrNotFound):
		return calf.Permanent(err)
	}
	return err
}

// deadlineReason is the error of a run whose deadline passed.
func deadlineReason(at time.Time) string {
	return fmt.Sprintf("timed out: the run's deadline (%s) passed", at.UTC().Format(time.RFC3339))
}

// timedOut ends the run st, which reached a step after its deadline, as
// its deadline's timer would: cancelled, for the same reason. Whichever
// comes first, the run ends the same way. (A step starts once its calls
// have their results: the run has no subagent or approval to end.)
func (h *handlers) timedOut(ctx context.Context, st *runState) error {
	st, err := h.rt.runs.Update(ctx, st.RunID, func(st *runState) (bool, error) {
		if st.Status.Terminal() {
			return false, nil
		}
		st.Status, st.Error, st.EndedAt = RunCancelled, deadlineReason(st.Deadline), h.rt.now()
		return true, nil
	})
	if err != nil {
		return err
	}
	return h.finish(ctx, st)
}
