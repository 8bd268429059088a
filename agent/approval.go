package agent

import (
	"context"
	"encoding/json"

	"github.com/calf-go/calf/agent/approval"
	"github.com/calf-go/calf/tool"
)

// The engine's side of approvals: a call that asks is recorded as an
// [approval.Approval] and published (requestApproval, in handlers.go), an
// answer is carried out (onApproval), a run that ends ends its requests
// (engine.EndApprovals). The answer is a signal of the run: the request's
// run waits for it (approvalwait.go), and its wake is the answer event.
// Reading and answering requests is the approval package's.

// suffixApproval is the last token of an agent's approval channel
// ([approval.Channel]).
const suffixApproval = "approval"

// root returns the root of the runs st starts: its own root, or st, a run
// of agent.
func (st *runState) root(agent string) *approval.Root {
	if st.Root != nil {
		return st.Root
	}
	return &approval.Root{Agent: agent, RunID: st.RunID, CorrelationID: st.correlationID()}
}

// newApproval returns the approval request of the call ev of the run st,
// of a tool of kind, asking for why, after the hooks decided records.
func newApproval(agent string, st *runState, ev ToolCallEvent, kind tool.Kind, why string, records []HookRecord) *approval.Approval {
	a := &approval.Approval{
		ID: approval.ID(st.RunID, ev.ToolCallID), Agent: agent, RunID: st.RunID, SessionID: st.SessionID, CorrelationID: st.correlationID(), Root: st.Root,
		Step: ev.Step, ToolCallID: ev.ToolCallID, ToolName: ev.ToolName, ToolKind: kind,
		Arguments: json.RawMessage(ev.Arguments), Digest: approval.Digest(ev.ToolName, []byte(ev.Arguments)),
		Reason: why, Status: approval.Pending,
	}
	for _, r := range records {
		a.Hooks = append(a.Hooks, approval.HookDecision{Hook: r.Hook, Event: string(r.Event), Action: string(r.Action), Reason: r.Reason, Arguments: r.Arguments})
	}
	return a
}

// hookRecords returns what the hooks decided before the call of a asked.
func hookRecords(a *approval.Approval) []HookRecord {
	var out []HookRecord
	for _, d := range a.Hooks {
		out = append(out, HookRecord{Hook: d.Hook, Event: HookEvent(d.Event), Action: HookAction(d.Action), Reason: d.Reason, Arguments: d.Arguments})
	}
	return out
}

// setSessionTool adds the tool name to the session's allowed tools, or
// removes it.
func (rt *Runtime) setSessionTool(ctx context.Context, id, name string, allow bool) error {
	return rt.sessions.SetToolAllowed(ctx, id, name, allow)
}

// sessionAllows reports whether the session id allows the tool name
// without asking.
func (rt *Runtime) sessionAllows(ctx context.Context, id, name string) (bool, error) {
	return rt.sessions.Allows(ctx, id, name)
}
