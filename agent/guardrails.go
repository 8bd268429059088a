package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/calf-go/calf/agent/internal/engine"
	"github.com/calf-go/calf/model"
)

// ErrGuardrailTripped is matched by the error of a run that a guardrail
// ended: a *RunError whose Guardrail says which guardrail tripped, at which
// stage, and why.
var ErrGuardrailTripped = errors.New("agent: guardrail tripped")

// GuardrailStage says what a guardrail checks.
type GuardrailStage string

// The guardrail stages.
const (
	// GuardrailOnInput checks the user's input, before the run's first model
	// call (or alongside it, for a parallel guardrail).
	GuardrailOnInput GuardrailStage = "input"
	// GuardrailOnOutput checks the run's final output, before the run
	// completes.
	GuardrailOnOutput GuardrailStage = "output"
)

// defaultGuardrailTimeout is the default of [Guardrail.Timeout].
const defaultGuardrailTimeout = time.Minute

// Guardrail checks a run's input or its output. When it trips, the run
// ends failed, with an error matching [ErrGuardrailTripped], and its output
// event says which guardrail tripped and why ([OutputEvent.Guardrail]). A
// guardrail that returns an error, panics or outlasts its timeout trips
// too: a check that cannot be made does not let the run through.
type Guardrail struct {
	// Name identifies the guardrail in errors and events.
	Name string
	// Func checks in and says whether the guardrail trips.
	Func func(ctx context.Context, in GuardrailInput) (GuardrailResult, error)
	// Parallel, for an input guardrail, runs it alongside the first model
	// call instead of before it, which saves its time on every run that
	// passes; when it trips, the model's answer is discarded (the call is
	// still paid for). Output guardrails always run before the run
	// completes.
	Parallel bool
	// Timeout bounds one check. Default: a minute.
	Timeout time.Duration
}

// GuardrailInput is what a guardrail checks.
type GuardrailInput struct {
	Stage     GuardrailStage
	Agent     string
	RunID     string
	SessionID string
	// Text is the user's input (the run's last user message) for an
	// input guardrail, and the final output (text, or the JSON of a
	// structured output) for an output guardrail.
	Text string
	// Messages is the conversation so far, session history included: a
	// copy, the guardrail's to change.
	Messages []model.Message

	rt *Runtime
}

// Runtime returns the runtime of the worker that runs the check, for a
// guardrail that starts runs of other agents (see [JudgeGuardrail]).
func (in GuardrailInput) Runtime() *Runtime { return in.rt }

// GuardrailResult is a guardrail's verdict, and the structured output of
// a judge agent (see [JudgeGuardrail]).
type GuardrailResult struct {
	Tripped bool `json:"tripped" jsonschema:"true when the text breaks the policy"`
	// Reason says why it tripped.
	Reason string `json:"reason" jsonschema:"why, in one sentence"`
}

// GuardrailTrip records a guardrail that tripped.
type GuardrailTrip struct {
	Name   string         `json:"name"`
	Stage  GuardrailStage `json:"stage"`
	Reason string         `json:"reason"`
}

func (g *GuardrailTrip) message() string {
	return fmt.Sprintf("the %s guardrail %s tripped: %s", g.Stage, g.Name, g.Reason)
}

func checkGuardrails(gs []Guardrail, stage GuardrailStage) error {
	for i, g := range gs {
		switch {
		case g.Name == "":
			return fmt.Errorf("%w: %s guardrail %d has no name", ErrInvalidAgent, stage, i)
		case g.Func == nil:
			return fmt.Errorf("%w: %s guardrail %s has no Func", ErrInvalidAgent, stage, g.Name)
		case g.Parallel && stage == GuardrailOnOutput:
			return fmt.Errorf("%w: output guardrail %s: only input guardrails run in parallel", ErrInvalidAgent, g.Name)
		}
	}
	return nil
}

// check runs g on in, with its timeout, and returns the trip, or nil.
func (g *Guardrail) check(ctx context.Context, in GuardrailInput) *GuardrailTrip {
	timeout := cmp.Or(g.Timeout, defaultGuardrailTimeout)
	r, err := engine.CallWithin(ctx, timeout, func(ctx context.Context) (GuardrailResult, error) { return g.Func(ctx, in) })
	if errors.Is(err, engine.ErrTimedOut) {
		err = fmt.Errorf("no verdict within %s", timeout)
	}
	switch {
	case err != nil:
		return &GuardrailTrip{Name: g.Name, Stage: in.Stage, Reason: "the check failed: " + err.Error()}
	case r.Tripped:
		return &GuardrailTrip{Name: g.Name, Stage: in.Stage, Reason: cmp.Or(r.Reason, "no reason given")}
	}
	return nil
}

// checkAll runs gs on in, all at once, and returns the first trip in gs's
// order, or nil.
func checkAll(ctx context.Context, gs []*Guardrail, in GuardrailInput) *GuardrailTrip {
	trips := make([]*GuardrailTrip, len(gs))
	var wg sync.WaitGroup
	for i, g := range gs {
		wg.Go(func() { trips[i] = g.check(ctx, in) })
	}
	wg.Wait()
	for _, t := range trips {
		if t != nil {
			return t
		}
	}
	return nil
}

// guardrailSets are an agent's guardrails as its inference stages check
// them, fixed when it is served.
type guardrailSets struct {
	before   []*Guardrail // input guardrails checked before the model call
	parallel []*Guardrail // input guardrails checked alongside it
	output   []*Guardrail
}

// guardrailSets sorts the agent's guardrails for its inference stages.
func (a *Agent[Out]) guardrailSets() guardrailSets {
	var s guardrailSets
	for i := range a.opts.InputGuardrails {
		if g := &a.opts.InputGuardrails[i]; g.Parallel {
			s.parallel = append(s.parallel, g)
		} else {
			s.before = append(s.before, g)
		}
	}
	for i := range a.opts.OutputGuardrails {
		s.output = append(s.output, &a.opts.OutputGuardrails[i])
	}
	return s
}

// inputGuardrails is the inference stage of the input guardrails checked
// before the first model call: a trip ends the run.
func (h *handlers) inputGuardrails(ctx context.Context, inf *inference) (bool, error) {
	if inf.st.Step != 1 {
		return false, nil
	}
	inf.guard = h.guardrailInput(inf.st, GuardrailOnInput, lastUserText(inf.st.Messages))
	if t := checkAll(ctx, h.guards.before, inf.guard); t != nil {
		if ctx.Err() != nil {
			return true, ctx.Err()
		}
		return true, h.trip(ctx, inf.st.RunID, inf.ev.Step, t)
	}
	return false, nil
}

// startParallelGuardrails is the inference stage that starts the input
// guardrails checked alongside the first model call.
func (h *handlers) startParallelGuardrails(ctx context.Context, inf *inference) (bool, error) {
	if inf.st.Step != 1 {
		return false, nil
	}
	if len(h.guards.before) == 0 {
		inf.guard = h.guardrailInput(inf.st, GuardrailOnInput, lastUserText(inf.st.Messages))
	}
	inf.checks.Go(func() { inf.parallel = checkAll(ctx, h.guards.parallel, inf.guard) })
	return false, nil
}

// awaitParallelGuardrails is the inference stage that waits, after the
// model call, for the guardrails checked alongside it: a trip ends the
// run, and the model's answer is discarded.
func (h *handlers) awaitParallelGuardrails(ctx context.Context, inf *inference) (bool, error) {
	inf.checks.Wait()
	if t := inf.parallel; t != nil {
		if ctx.Err() != nil {
			return true, ctx.Err() // shutting down: leave the message for redelivery
		}
		return true, h.trip(ctx, inf.st.RunID, inf.ev.Step, t)
	}
	return false, nil
}

// outputGuardrails is the inference stage of the output guardrails: they
// check a final answer before the run completes, and a trip ends the run.
func (h *handlers) outputGuardrails(ctx context.Context, inf *inference) (bool, error) {
	msg := inf.resp.Message
	if len(msg.ToolCalls) > 0 {
		return false, nil
	}
	if _, verr := h.a.validate(msg.Text()); verr != nil {
		return false, nil // a repair step follows: the guardrails check its answer
	}
	if t := checkAll(ctx, h.guards.output, h.guardrailInput(inf.st, GuardrailOnOutput, msg.Text())); t != nil {
		if ctx.Err() != nil {
			return true, ctx.Err()
		}
		return true, h.trip(ctx, inf.st.RunID, inf.ev.Step, t)
	}
	return false, nil
}

// guardrailInput returns the input of the run's guardrails at stage.
func (h *handlers) guardrailInput(st *runState, stage GuardrailStage, text string) GuardrailInput {
	return GuardrailInput{Stage: stage, Agent: h.a.name, RunID: st.RunID, SessionID: st.SessionID, Text: text, Messages: model.CloneMessages(st.Messages), rt: h.rt}
}

// lastUserText returns the text of the last user message of msgs.
func lastUserText(msgs []model.Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == model.RoleUser {
			return msgs[i].Text()
		}
	}
	return ""
}

// trip ends the run at step as failed by a guardrail and emits its output.
func (h *handlers) trip(ctx context.Context, id string, step int, t *GuardrailTrip) error {
	st, err := h.rt.runs.Update(ctx, id, func(st *runState) (bool, error) {
		if st.Status.Terminal() || st.Step != step || st.Phase != phaseInference {
			return false, nil
		}
		st.Status, st.Error, st.Guardrail, st.EndedAt = RunFailed, t.message(), t, h.rt.now()
		return true, nil
	})
	if err != nil {
		return err
	}
	if st.Status.Terminal() {
		return h.finish(ctx, st)
	}
	return h.next(ctx, st)
}

// JudgeOptions configures a guardrail made by [JudgeGuardrail].
type JudgeOptions struct {
	// Parallel, for an input guardrail, asks the judge alongside the
	// first model call instead of before it ([Guardrail.Parallel]).
	// Default false: before it.
	Parallel bool
}

// JudgeGuardrail returns a guardrail that asks the agent judge (a model as
// judge, with the policy in its instructions) whether the text breaks the
// policy: judge gets the text as its prompt and answers with a
// [GuardrailResult]. The judge runs as a run of its own (of id
// "{run}/guardrail-{name}-{stage}", so that a check made again after a
// crash reuses its answer), carried out by any process that serves judge,
// while the checking handler waits for it. Nil opts runs it before the
// model call.
func JudgeGuardrail(name string, judge *Agent[GuardrailResult], opts *JudgeOptions) Guardrail {
	var parallel bool
	if opts != nil {
		parallel = opts.Parallel
	}
	return Guardrail{Name: name, Parallel: parallel, Func: func(ctx context.Context, in GuardrailInput) (GuardrailResult, error) {
		if in.rt == nil {
			return GuardrailResult{}, errors.New("no runtime to run the judge on")
		}
		out, err := judge.Run(ctx, in.rt, in.Text, &RunOptions{RunID: in.RunID + "/guardrail-" + name + "-" + string(in.Stage)})
		if err != nil {
			return GuardrailResult{}, fmt.Errorf("the judge %s: %w", judge.Name(), err)
		}
		return out.Output, nil
	}}
}
