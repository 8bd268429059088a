package team

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/workflow"
)

// WorkflowMember returns the workflow w as a team member: in turns the
// member's prompt into the workflow's initial state, and out turns its
// final state into the text the team passes on. The workflow must be
// served ([workflow.Workflow.Serve]) by some worker; its run is a child run
// of the team run, and its end comes back as an event like an agent's.
func WorkflowMember[S any](w *workflow.Workflow[S], description string, in func(prompt string) (S, error), out func(final S) (string, error)) Member {
	return &workflowMember[S]{w: w, description: description, in: in, out: out}
}

type workflowMember[S any] struct {
	w           *workflow.Workflow[S]
	description string
	in          func(string) (S, error)
	out         func(S) (string, error)
}

func (m *workflowMember[S]) Name() string        { return m.w.Name() }
func (m *workflowMember[S]) Description() string { return m.description }

func (m *workflowMember[S]) Submit(ctx context.Context, rt *agent.Runtime, prompt string, opts *RunOptions) (string, error) {
	o := options(opts)
	s, err := m.in(prompt)
	if err != nil {
		return "", fmt.Errorf("team: workflow %s: initial state: %w", m.w.Name(), err)
	}
	return m.w.Submit(ctx, rt, s, &workflow.RunOptions{RunID: o.RunID, ReplyTo: o.ReplyTo, Parent: o.Parent, Budget: o.Budget})
}

func (m *workflowMember[S]) workflowName() string { return m.w.Name() }

func (m *workflowMember[S]) Cancel(ctx context.Context, rt *agent.Runtime, runID, reason string) error {
	return m.w.Cancel(ctx, rt, runID, reason)
}

func (m *workflowMember[S]) DecodeOutput(ev *agent.OutputEvent) (string, error) {
	if err := outputError("workflow", m.w.Name(), ev); err != nil {
		return "", err
	}
	var s S
	if err := json.Unmarshal(ev.Content, &s); err != nil {
		return "", fmt.Errorf("team: workflow %s: decode final state: %w", m.w.Name(), err)
	}
	return m.out(s)
}
