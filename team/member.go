package team

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
)

// Member is a participant of a team: an agent ([AgentMember],
// [RemoteAgent]) or another team (*[Team]). A team knows its members by
// name and talks to them by events only: it starts a member's run with
// Submit, whichever worker serves the member carries the run out, and the
// run's end comes back as an [agent.OutputEvent] on the team's channel. So
// members can be hosted by other workers, and no goroutine waits for them.
type Member interface {
	// Name is the member's name: unique within a team, and the name of the
	// agent (or team) whose channels receive its runs.
	Name() string
	// Description says what the member does. Moderators and managers read
	// it to choose who works next.
	Description() string
	// Submit starts a run of the member with prompt as its input, without
	// waiting for it, and returns its id. A team gives opts.RunID
	// (deterministic, so that a redelivered step starts nothing new),
	// opts.Parent, and opts.ReplyTo: when the run ends the member must
	// publish its [agent.OutputEvent] as ReplyTo asks. A team run with a
	// budget gives opts.Budget, what is left of it, which the member run
	// should be bounded by. Submitting the same run id again must not start
	// a second run.
	Submit(ctx context.Context, rt *agent.Runtime, prompt string, opts *RunOptions) (string, error)
	// DecodeOutput returns the text that a completed run's output passes on
	// to the team, or the error of a run that failed or was cancelled (an
	// *agent.RunError).
	DecodeOutput(ev *agent.OutputEvent) (string, error)
}

// Canceller is implemented by the members whose runs can be cancelled:
// cancelling a team run cancels the runs in flight of such members. The
// members that [AgentMember], [RemoteAgent] and [WorkflowMember] return
// implement it, and so does [Team].
type Canceller interface {
	// Cancel ends the member's run runID with status cancelled, for
	// reason, unless it has ended.
	Cancel(ctx context.Context, rt *agent.Runtime, runID, reason string) error
}

// options returns a copy of opts, with a fresh run id when it has none.
func options(opts *RunOptions) RunOptions {
	var o RunOptions
	if opts != nil {
		o = *opts
	}
	if o.RunID == "" {
		o.RunID = calf.NewID()
	}
	return o
}

// AgentMember returns a as a team member. The agent must be served
// ([agent.Agent.Serve]) by some worker on the runtime's broker, unless the
// runtime serves on demand ([agent.RuntimeOptions.ServeOnDemand]): its
// runs, started with [agent.Agent.Submit], then serve it. Its runs get
// no dependencies from the team: an agent that needs some gets them from
// [agent.ServeOptions.LocalDeps]. A structured output is passed on as its
// JSON text.
func AgentMember[Out any](a *agent.Agent[Out]) Member {
	return &agentMember[Out]{a: a}
}

type agentMember[Out any] struct{ a *agent.Agent[Out] }

func (m *agentMember[Out]) Name() string        { return m.a.Name() }
func (m *agentMember[Out]) Description() string { return m.a.Description() }

func (m *agentMember[Out]) Submit(ctx context.Context, rt *agent.Runtime, prompt string, opts *RunOptions) (string, error) {
	o := options(opts)
	return m.a.Submit(ctx, rt, prompt, &agent.RunOptions{RunID: o.RunID, SessionID: o.SessionID, ReplyTo: o.ReplyTo,
		Stream: o.Stream, Parent: o.Parent, Deadline: o.Deadline, Budget: o.Budget})
}

func (m *agentMember[Out]) Cancel(ctx context.Context, rt *agent.Runtime, runID, reason string) error {
	return m.a.Cancel(ctx, rt, runID, reason)
}

func (m *agentMember[Out]) agentName() string { return m.a.Name() }

func (m *agentMember[Out]) DecodeOutput(ev *agent.OutputEvent) (string, error) {
	if _, err := m.a.DecodeOutput(ev); err != nil {
		return "", err
	}
	return contentText(ev.Content), nil
}

// RemoteAgent returns a member for the agent named name, known by name
// only: some worker on the broker serves it, possibly a program in another
// language that follows docs/channels.md. Its output is passed on as text
// (a structured output as its JSON text).
func RemoteAgent(name, description string) Member {
	return &remoteAgent{name: name, description: description}
}

type remoteAgent struct{ name, description string }

func (m *remoteAgent) Cancel(ctx context.Context, rt *agent.Runtime, runID, reason string) error {
	_, err := rt.Cancel(ctx, agent.RunRef{Kind: "agent", Name: m.name, RunID: runID}, reason)
	return err
}

func (m *remoteAgent) Name() string        { return m.name }
func (m *remoteAgent) Description() string { return m.description }

func (m *remoteAgent) Submit(ctx context.Context, rt *agent.Runtime, prompt string, opts *RunOptions) (string, error) {
	return submitAgent(ctx, rt, m.name, prompt, opts)
}

func (m *remoteAgent) DecodeOutput(ev *agent.OutputEvent) (string, error) {
	if err := outputError("agent", m.name, ev); err != nil {
		return "", err
	}
	return contentText(ev.Content), nil
}

func submitAgent(ctx context.Context, rt *agent.Runtime, name, prompt string, opts *RunOptions) (string, error) {
	o := options(opts)
	in := &agent.InputEvent{Content: prompt, Stream: o.Stream, ReplyTo: o.ReplyTo, Parent: o.Parent, Deadline: o.Deadline, Budget: o.Budget}
	req := &agent.SubmitRequest{Run: agent.RunRef{Kind: "agent", Name: name, RunID: o.RunID}, SessionID: o.SessionID, Input: in}
	if err := rt.Submit(ctx, req); err != nil {
		return "", err
	}
	return o.RunID, nil
}

// outputError returns the *agent.RunError of an output that is not
// complete, of the run of name, a kind ("agent", "team", "workflow").
func outputError(kind, name string, ev *agent.OutputEvent) error {
	ref := agent.RunRef{Kind: kind, Name: name, RunID: ev.RunID}
	switch ev.Status {
	case agent.OutputComplete:
		return nil
	case agent.OutputCancelled:
		return &agent.RunError{RunRef: ref, Status: agent.RunCancelled, Reason: ev.Error}
	default:
		return &agent.RunError{RunRef: ref, Status: agent.RunFailed, Reason: ev.Error}
	}
}

// kindOf says what a member is, for errors: "agent", "team", "workflow",
// or "member" for a Member of another kind.
func kindOf(m Member) string {
	switch m.(type) {
	case *Team:
		return "team"
	case *remoteAgent:
		return "agent"
	case interface{ workflowName() string }:
		return "workflow"
	case interface{ agentName() string }:
		return "agent"
	}
	return "member"
}

// contentText returns an output's content as text: a JSON string
// unquoted, any other JSON value as its text.
func contentText(raw json.RawMessage) string {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s
	}
	return string(raw)
}

// errorText returns the reason of a member's failure for a transcript.
func errorText(err error) string {
	var re *agent.RunError
	switch {
	case errors.As(err, &re) && re.Reason != "" && re.Status == agent.RunCancelled:
		return "cancelled: " + re.Reason
	case errors.As(err, &re) && re.Reason != "":
		return re.Reason
	}
	return err.Error()
}
