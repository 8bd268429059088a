package agent

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent/internal/engine"
	"github.com/calf-go/calf/model"
)

// An inference is one handling of an inference event: what the stages of
// [handlers.onInference] read and fill in, from the run's state to the
// model's answer.
type inference struct {
	msg     *calf.Message
	ev      inferenceEvent
	st      *runState
	version int64 // st's stored version
	rc      RunContext
	req     *model.Request
	// flight is the step's in the process (see flights): a response
	// obtained and not yet recorded is kept there.
	flight *engine.Flight[unsavedResponse]
	// claim is the step's claim, held while the model is called and its
	// response recorded (see claims).
	claim *engine.HeldClaim
	// The model call: its answer, the stream deltas it emitted, its error.
	resp    *model.Response
	deltas  int
	callErr error
	// The input guardrails of the first step: their input, and those that
	// run alongside the model call, with their trip.
	guard    GuardrailInput
	checks   sync.WaitGroup
	parallel *GuardrailTrip
}

// An inferenceStage does its part of an inference. It returns done true
// when it ended the handling of the event, with err as its outcome; with
// done false the next stage runs.
type inferenceStage func(h *handlers, ctx context.Context, inf *inference) (done bool, err error)

// inferenceStages returns the stages of the agent's inferences, in their
// order: the one place that order is written. A stage of a feature the
// agent does not use (guardrails, compaction, memory; the model's stages
// for a custom agent) is left out, so that it costs nothing on the run's
// path; what a run may set for itself (a pause, a budget, a deadline) is
// checked on every inference. Each stage lives in the file of its feature.
func (h *handlers) inferenceStages() []inferenceStage {
	a := h.a
	stages := []inferenceStage{
		(*handlers).stepDue,    // inference.go: the run waits for this step's model call
		(*handlers).pauseStage, // pause.go: a pause takes effect before the call
		(*handlers).limits,     // inference.go: max turns, the run's deadline
	}
	if a.step != nil {
		// A custom agent's step stands in for the model call, and records
		// its reply.
		return append(stages, (*handlers).customStage) // custom.go
	}
	if len(h.guards.before) > 0 {
		stages = append(stages, (*handlers).inputGuardrails) // guardrails.go
	}
	stages = append(stages, (*handlers).buildRequest) // inference.go
	if a.opts.Compaction != nil {
		stages = append(stages, (*handlers).compactStage) // compaction.go
	}
	if len(a.opts.Memory) > 0 {
		stages = append(stages, (*handlers).memoryStage) // memory.go
	}
	stages = append(stages, (*handlers).budgetStage) // budget.go: run and session budgets
	if len(h.guards.parallel) > 0 {
		stages = append(stages, (*handlers).startParallelGuardrails) // guardrails.go
	}
	if h.rt.tel != nil {
		stages = append(stages, (*handlers).tracedModelCall) // inference.go, in a chat span
	} else {
		stages = append(stages, (*handlers).modelCall) // inference.go
	}
	if len(h.guards.parallel) > 0 {
		stages = append(stages, (*handlers).awaitParallelGuardrails) // guardrails.go
	}
	stages = append(stages, (*handlers).modelFailed) // inference.go
	if len(h.guards.output) > 0 {
		stages = append(stages, (*handlers).outputGuardrails) // guardrails.go
	}
	return append(stages, (*handlers).recordResponse) // inference.go: record, then what follows
}

// onInference makes the model call of a step, records the response, and
// emits what follows: tool calls, a repair step, or the output. A
// redelivered inference whose response is recorded re-emits what follows
// without calling the model again. The work is done by the agent's
// inference stages (see inferenceStages), in order.
func (h *handlers) onInference(ctx context.Context, msg *calf.Message) error {
	id, err := runID(msg)
	if err != nil {
		return err
	}
	inf := &inference{msg: msg}
	if err := msg.Decode(&inf.ev); err != nil {
		return calf.Permanent(err)
	}
	return h.infer(ctx, inf, id)
}

// infer handles the inference inf of the run id: its stages, in order.
// One delivery of a step acts at a time in the process (see flights): one
// that comes while another is in hand waits, then finds the response
// recorded, or kept unrecorded, which it records rather than ask the model
// again. A response is kept until the inference is handled.
func (h *handlers) infer(ctx context.Context, inf *inference, id string) (err error) {
	key := engine.FlightKey{Run: id, Step: inf.ev.Step}
	if inf.flight, err = h.steps.Enter(ctx, key); err != nil {
		return err
	}
	defer func() {
		inf.claim.Release(ctx)
		h.steps.Leave(key, inf.flight, err == nil)
	}()
	if inf.st, inf.version, err = h.rt.runs.LoadStep(ctx, id, inf.ev.Step); err != nil {
		return err
	}
	for _, stage := range h.stages {
		if done, err := stage(h, ctx, inf); done {
			return err
		}
	}
	return nil
}

// stepDue ends the handling of an inference the run does not wait for: a
// run that ended answers again, a stale duplicate is dropped, and a step
// whose answer is recorded has what follows it emitted again.
func (h *handlers) stepDue(ctx context.Context, inf *inference) (bool, error) {
	st, step := inf.st, inf.ev.Step
	switch {
	case st.Status.Terminal():
		return true, h.finish(ctx, st)
	case step < st.Step:
		return true, nil // a stale duplicate: its consequences were recorded
	case step > st.Step:
		return true, calf.Permanent(fmt.Errorf("agent: run %s: inference for step %d, but the run is at step %d", st.RunID, step, st.Step))
	case st.Phase == phaseTools:
		return true, h.next(ctx, st)
	}
	return false, nil
}

// limits fails a run past its max turns or its deadline, and makes the
// step's RunContext.
func (h *handlers) limits(ctx context.Context, inf *inference) (bool, error) {
	st := inf.st
	if max := h.maxTurns(st); st.Step > max {
		return true, h.fail(ctx, st.RunID, fmt.Sprintf("max turns exceeded: the run needed more than %d model calls", max))
	}
	if !st.Deadline.IsZero() && !h.rt.now().Before(st.Deadline) {
		return true, h.timedOut(ctx, st)
	}
	inf.rc = RunContext{Context: ctx, deps: h.deps(st), Agent: h.a.name, RunID: st.RunID, SessionID: st.SessionID, Step: st.Step, rt: h.rt}
	return false, nil
}

// buildRequest makes the model request of the step.
func (h *handlers) buildRequest(ctx context.Context, inf *inference) (bool, error) {
	var err error
	if inf.req, err = h.request(inf.rc, inf.st); err != nil {
		return true, h.requestFailed(ctx, inf.st, err)
	}
	return false, nil
}

// modelCall calls the model, unless an earlier delivery of the step got
// its response and could not record it, or another process has the step
// in hand.
func (h *handlers) modelCall(ctx context.Context, inf *inference) (bool, error) {
	if done, err := h.beforeModelCall(ctx, inf); done || err != nil {
		return true, err
	}
	if inf.resp == nil {
		inf.resp, inf.deltas, inf.callErr = h.callModel(ctx, inf.st, inf.req)
		h.keepResponse(inf)
	}
	return false, nil
}

// beforeModelCall takes the response an earlier delivery of the step kept,
// or else admits a model call and claims the step; done true says another
// process has recorded the step meanwhile, and what follows it is emitted.
func (h *handlers) beforeModelCall(ctx context.Context, inf *inference) (done bool, err error) {
	if r, ok := h.steps.Outcome(inf.flight); ok {
		inf.resp, inf.deltas = r.resp, r.deltas
		return false, nil
	}
	if err := h.steps.Admit(); err != nil {
		return true, err
	}
	if h.claims == nil {
		return false, nil // a local broker: this process's flights suffice
	}
	id, step := inf.st.RunID, inf.ev.Step
	var finished bool
	inf.claim, finished, err = h.claims.Take(ctx, engine.ClaimStepKey(id, step), func(ctx context.Context) (bool, error) {
		st, _, err := h.rt.runs.Load(ctx, id)
		if err != nil {
			return false, err
		}
		return st.Status.Terminal() || st.Step != step || st.Phase != phaseInference, nil
	})
	if err != nil || !finished {
		return err != nil, err
	}
	if inf.st, inf.version, err = h.rt.runs.Load(ctx, id); err != nil {
		return true, err
	}
	_, err = h.stepDue(ctx, inf)
	return true, err
}

// keepResponse keeps the model's response until it is recorded.
func (h *handlers) keepResponse(inf *inference) {
	if inf.callErr == nil && inf.resp != nil {
		h.steps.Keep(inf.flight, unsavedResponse{resp: inf.resp, deltas: inf.deltas})
	}
}

// tracedModelCall is modelCall in a chat span, for a runtime that records
// telemetry.
func (h *handlers) tracedModelCall(ctx context.Context, inf *inference) (bool, error) {
	if h.a.model == nil {
		return h.modelCall(ctx, inf)
	}
	if done, err := h.beforeModelCall(ctx, inf); done || err != nil {
		return true, err
	}
	if inf.resp != nil {
		return false, nil // kept from an earlier delivery
	}
	msg, _ := calf.MessageFromContext(ctx)
	name := h.a.model.Name()
	mctx, span := h.rt.tel.Chat(ctx, msg, h.a.name, name, inf.st.Step)
	began := time.Now()
	inf.resp, inf.deltas, inf.callErr = h.callModel(mctx, inf.st, inf.req)
	h.rt.tel.EndChat(ctx, span, name, inf.resp, inf.callErr, time.Since(began), h.rt.prices)
	h.keepResponse(inf)
	return false, nil
}

// modelFailed fails the run whose model call failed, unless the process is
// shutting down.
func (h *handlers) modelFailed(ctx context.Context, inf *inference) (bool, error) {
	switch {
	case inf.callErr == nil:
		return false, nil
	case ctx.Err() != nil:
		return true, ctx.Err() // shutting down: leave the message for redelivery
	}
	return true, h.fail(ctx, inf.st.RunID, inf.callErr.Error())
}

// recordResponse records the model's answer in the run, through an outage
// of the store, so that the model is not asked again for an answer it
// gave, and emits what follows.
func (h *handlers) recordResponse(ctx context.Context, inf *inference) (bool, error) {
	// updateFrom changes the state it is given: a try after a failed one
	// starts from the stored state, read again.
	prev, first := inf.st, true
	id, step := inf.st.RunID, inf.ev.Step
	st, err := engine.RetryOutage(ctx, func() (*runState, error) {
		from, v := prev, inf.version
		if !first {
			var err error
			if from, v, err = h.rt.runs.Load(ctx, id); err != nil {
				return nil, err
			}
		}
		first = false
		return h.rt.runs.UpdateFrom(ctx, from, v, func(cur *runState) (bool, error) {
			if cur.Status.Terminal() || cur.Step != step || cur.Phase != phaseInference {
				return false, nil // cancelled, or recorded by another delivery
			}
			h.record(cur, inf.resp, inf.deltas)
			if t := inf.resp.Usage.InputTokens; t > 0 && engine.SameCompaction(cur.Compacted, prev.Compacted) {
				cur.LastInput = &engine.InputSize{Tokens: int(t), Messages: len(inf.req.Messages)}
			}
			return true, nil
		})
	})
	if err != nil {
		return true, err
	}
	return true, h.next(ctx, st)
}
