package engine

// SubagentRef is the reference (package agent's ReplyTo.Ref, as JSON) that
// a subagent run's output carries back to its parent: where the output
// goes there.
type SubagentRef struct {
	Run     string `json:"run"`
	Step    int    `json:"step"`
	Tool    string `json:"tool"`
	Call    string `json:"call"`
	Session string `json:"session,omitempty"`
	// Agent is the subagent the call started.
	Agent string `json:"agent,omitempty"`
	// Trace is the parent run's trace context, which the result carries
	// back (the subagent's messages carry its own run's).
	Trace string `json:"trace,omitempty"`
}
