package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/store"
)

// DeadlineChannel carries the events of runs' deadlines: a durable timer
// per run with a deadline ([Runtime.StartDeadline]) emits one there when
// the deadline passes, and whichever process serves timers cancels the
// run if it has not ended.
const DeadlineChannel = "calf.runs.deadline"

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
		ID: deadlineTimer(run), Due: at, Channel: DeadlineChannel, Data: data, Key: run.RunID,
		EventID:  run.RunID + ".deadline",
		Metadata: calf.Metadata{CorrelationID: run.RunID, RunID: run.RunID},
	})
	if err != nil {
		return fmt.Errorf("%s %s: the deadline of run %s: %w", run.Kind, run.Name, run.RunID, err)
	}
	return nil
}

// serveDeadlines subscribes this process to the deadlines' events.
func (rt *Runtime) serveDeadlines(ctx context.Context) error {
	if err := calf.CreateChannels(ctx, rt.client.Broker(), DeadlineChannel); err != nil {
		return err
	}
	return rt.client.Handle(ctx, DeadlineChannel, rt.onDeadline, &calf.SubscribeOptions{Group: DeadlineChannel})
}

// onDeadline cancels the run whose deadline passed, unless it has ended.
func (rt *Runtime) onDeadline(ctx context.Context, msg *calf.Message) error {
	var ev deadlineEvent
	if err := msg.Decode(&ev); err != nil {
		return calf.Permanent(err)
	}
	reason := fmt.Sprintf("timed out: the run's deadline (%s) passed", ev.Deadline.UTC().Format(time.RFC3339))
	_, err := rt.Cancel(ctx, ev.Run, reason)
	switch {
	case err == nil, errors.Is(err, ErrRunEnded):
		return nil
	case errors.Is(err, store.ErrNotFound):
		return calf.Permanent(err)
	}
	return err
}
