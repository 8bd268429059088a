package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent/internal/engine"
	"github.com/calf-go/calf/agent/internal/telemetry"
)

// depsJSON returns the JSON of d, or nil when d is unset or does not
// encode (the run's input says why when it is built).
func depsJSON(d DepsValue) json.RawMessage {
	if d.isZero() {
		return nil
	}
	b, _ := json.Marshal(d.v)
	return b
}

// input builds the input message of a new run.
// inbox, when set, is the caller's inbox, where the output is to go.
func (a *Agent[Out]) input(ctx context.Context, rt *Runtime, prompt string, opts *RunOptions, stream bool, inbox string) (*calf.Message, InputEvent, error) {
	var o RunOptions
	if opts != nil {
		o = *opts
	}
	id := o.RunID
	if id == "" {
		id = rt.newID()
	}
	in := InputEvent{Content: prompt, Parts: o.Parts, Stream: stream, ReplyTo: o.ReplyTo, Parent: o.Parent, Messages: o.Thread, Deadline: o.Deadline}
	if b := o.Budget; b != nil {
		if err := b.Validate(); err != nil {
			return nil, InputEvent{}, fmt.Errorf("agent %s: RunOptions.Budget: %w", a.name, err)
		}
		in.Budget = b
	}
	if o.Thread != nil && o.SessionID != "" {
		return nil, InputEvent{}, fmt.Errorf("agent %s: RunOptions.Thread and SessionID both name the conversation to continue: give one", a.name)
	}
	if o.Permissions != nil {
		if a.opts.Permissions == nil {
			return nil, InputEvent{}, fmt.Errorf("agent %s: RunOptions.Permissions needs an agent with permissions of its own (Options.Permissions), whose workers carry out approvals", a.name)
		}
		if err := o.Permissions.validate(); err != nil {
			return nil, InputEvent{}, fmt.Errorf("agent %s: RunOptions.Permissions: %w", a.name, err)
		}
		in.Permissions = o.Permissions
	}
	if o.IdempotencyKey != "" {
		// The request is what the caller asked: not where the answer
		// goes, nor whether it streams.
		req := in
		req.ReplyTo, req.Stream = nil, false
		var err error
		if id, err = rt.RunForKey(ctx, "agent/"+a.name, o.IdempotencyKey, struct {
			In      InputEvent      `json:"in"`
			Session string          `json:"session,omitempty"`
			Deps    json.RawMessage `json:"deps,omitempty"`
		}{req, o.SessionID, depsJSON(o.Deps)}, id); err != nil {
			return nil, InputEvent{}, fmt.Errorf("agent %s: %w", a.name, err)
		}
	}
	if inbox != "" {
		in.ReplyTo = &ReplyTo{Channel: inbox, Key: id}
	}
	// Deps travel only when the caller gave some: a run without them
	// carries none, and a worker's LocalDeps (or the zero value) serve.
	if !o.Deps.isZero() {
		d, err := json.Marshal(o.Deps.v)
		if err != nil {
			return nil, InputEvent{}, fmt.Errorf("agent %s: RunOptions.Deps of type %T cannot travel with the run, which carries them as JSON: %v; "+
				"leave RunOptions.Deps unset and give the dependencies to each process that serves the agent as ServeOptions.LocalDeps", a.name, o.Deps.v, err)
		}
		in.Deps = d
	}
	msg, err := rt.client.NewMessage(ctx, InputChannel(a.name), in, calf.WithID(engine.InputID(id)), calf.WithKey(id),
		calf.WithMetadata(calf.Metadata{CorrelationID: id, RunID: id}))
	if err != nil {
		return nil, InputEvent{}, err
	}
	msg.Metadata.SessionID = o.SessionID
	return msg, in, nil
}

// Submit starts a run without waiting for it and returns its id. The run
// is carried out by whichever processes serve the agent; its output goes
// to the agent's output channel and, when opts.ReplyTo is set, to the
// reply channel, where a handler (of a parent agent, a team, a workflow)
// picks it up. Called from inside a handler, the input records the
// handled message as its cause. Submitting a run id again starts nothing
// new: a run that has ended answers again with its output.
func (a *Agent[Out]) Submit(ctx context.Context, rt *Runtime, prompt string, opts *RunOptions) (string, error) {
	rt, err := a.onDemand(ctx, rt)
	if err != nil {
		return "", err
	}
	msg, in, err := a.input(ctx, rt, prompt, opts, opts != nil && opts.Stream, "")
	if err != nil {
		return "", err
	}
	if opts != nil && opts.Parent != "" {
		// A child run (a team member's, a workflow node's): what waits on
		// it learns at once when no process serves the agent.
		if refused, err := rt.refuseUnserved(ctx, a.name, msg, &in); err != nil {
			return "", fmt.Errorf("agent %s: submit run: %w", a.name, err)
		} else if refused {
			return msg.Metadata.RunID, nil
		}
	}
	// The span of a submitted run is its start: the caller does not wait.
	_, span := rt.tel.Invoke(ctx, a.name, msg)
	err = rt.publishInput(ctx, msg)
	telemetry.EndInvoke(span, nil, err)
	if err != nil {
		return "", fmt.Errorf("agent %s: submit run: %w", a.name, err)
	}
	return msg.Metadata.RunID, nil
}

// SubmitRequest asks [Runtime.Submit] for a run of an agent known by
// name.
type SubmitRequest struct {
	// Run names the agent and the run's id, both required.
	Run RunRef
	// SessionID is the run's session, or none when empty, whatever the
	// message being handled (when called from a handler) has.
	SessionID string
	// Input is the run's input event. Its Deps must be what that agent's
	// Deps encode to.
	Input *InputEvent
}

// Submit starts the run req asks for, of an agent that any process on
// the runtime's broker may serve, without waiting for it: it publishes
// the run's input event (id "{run}.input", key the run id). It is the
// untyped form of [Agent.Submit], for callers that know an agent by name
// only.
func (rt *Runtime) Submit(ctx context.Context, req *SubmitRequest) error {
	if rt == nil {
		return ErrNoRuntime
	}
	if req == nil || req.Input == nil {
		return errors.New("agent: submit needs an input")
	}
	if err := req.Run.agentRef("submit"); err != nil {
		return err
	}
	agentName, runID := req.Run.Name, req.Run.RunID
	if err := calf.ValidateChannel(InputChannel(agentName)); err != nil {
		return fmt.Errorf("agent: submit to %q: %w", agentName, err)
	}
	if err := rt.prepareInput(ctx, InputChannel(agentName)); err != nil {
		return fmt.Errorf("agent %s: submit run %s: %w", agentName, runID, err)
	}
	_, err := rt.client.Emit(ctx, InputChannel(agentName), req.Input, calf.WithID(engine.InputID(runID)), calf.WithKey(runID),
		calf.WithMetadata(calf.Metadata{CorrelationID: runID, RunID: runID}),
		// The run's session is the request's, even when empty: a run
		// started from a handler must not join the handled run's session.
		func(m *calf.Message) { m.Metadata.SessionID = req.SessionID })
	if err != nil {
		return fmt.Errorf("agent %s: submit run %s: %w", agentName, runID, err)
	}
	return nil
}
