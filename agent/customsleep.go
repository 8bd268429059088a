package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent/internal/engine"
)

// Sleep has the step go on after d, as its next call: the first time the
// step makes it, the wake time is recorded and Sleep returns an error,
// which the step returns (it may return anything: the run waits all the
// same); the run then waits, holding no goroutine and no message, as a
// durable timer in the store ([Timer]), and at the wake time whichever
// process serves the agent runs the step again, where its earlier calls
// return what they returned and Sleep returns nil. The wait survives
// restarts of every process; a run cancelled meanwhile stays cancelled
// (its timer then fires into nothing). A d of zero or less returns nil
// at once, and records nothing.
//
//	if err := sc.Sleep(10 * time.Minute); err != nil {
//		return "", err
//	}
func (sc *StepContext[State]) Sleep(d time.Duration) error {
	return sc.sleepUntil(func(now time.Time) time.Time { return now.Add(d) })
}

// SleepUntil is [StepContext.Sleep] until t.
func (sc *StepContext[State]) SleepUntil(t time.Time) error {
	return sc.sleepUntil(func(time.Time) time.Time { return t })
}

func (sc *StepContext[State]) sleepUntil(wake func(now time.Time) time.Time) error {
	rc, c := sc.RunContext, sc.calls
	if c == nil || rc.rt == nil {
		return errors.New("agent: Sleep outside a custom agent's step")
	}
	_, key, callID := c.next(rc)
	rec, ok, err := engine.RecordedCall(rc, rc.rt.store, key, "sleep")
	if err != nil {
		return err
	}
	now := rc.rt.now()
	if !ok {
		w := wake(now)
		if !w.After(now) {
			return nil
		}
		if rec, err = engine.RecordCall(rc, rc.rt.store, key, &engine.CallRecord{Kind: "sleep", Wake: w.UTC()}); err != nil {
			return err
		}
	}
	if !rec.Wake.After(now) {
		return nil
	}
	data, err := json.Marshal(inferenceEvent{Step: rc.Step})
	if err != nil {
		return err
	}
	eventID := engine.InferenceID(rc.RunID, rc.Step) + ".wake." + callID
	if _, err := rc.rt.StartTimer(rc, Timer{
		ID: "agent/" + rc.Agent + "/" + rc.RunID + "/" + strconv.Itoa(rc.Step) + "/" + callID, Due: rec.Wake,
		Channel: inferenceChannel(rc.Agent), Data: data, Key: rc.RunID, EventID: eventID,
		Metadata: calf.Metadata{CorrelationID: c.correlationID, RunID: rc.RunID, SessionID: rc.SessionID},
	}); err != nil {
		return fmt.Errorf("agent: Sleep: %w", err)
	}
	c.waiting = true
	return fmt.Errorf("%w: sleeping until %s", errAwait, rec.Wake.Format(time.RFC3339Nano))
}
