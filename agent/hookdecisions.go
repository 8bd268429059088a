package agent

import (
	"encoding/json"

	"github.com/calf-go/calf/tool"
)

// Allow returns the decision that lets the call, its result or the prompt
// through to the next hook ([HookAllow]); the zero HookDecision is the
// same.
func Allow() HookDecision { return HookDecision{Action: HookAllow} }

// Deny returns the decision that stops the call (pre_tool_use), withholds
// its result (post_tool_use) or refuses the prompt, for reason, which the
// model (or, for a prompt, the run's error) is told ([HookDeny]).
func Deny(reason string) HookDecision { return HookDecision{Action: HookDeny, Reason: reason} }

// Skip returns the decision that lets the call (or its result) through as
// it is now, and runs no later hook ([HookSkip]).
func Skip() HookDecision { return HookDecision{Action: HookSkip} }

// Ask returns the pre_tool_use decision that sends the call to a person's
// approval, for reason, the approval request's ([HookAsk]).
func Ask(reason string) HookDecision { return HookDecision{Action: HookAsk, Reason: reason} }

// TransformArguments returns the pre_tool_use decision that replaces the
// call's arguments (a JSON object) with args ([HookTransform]).
func TransformArguments(args json.RawMessage) HookDecision {
	return HookDecision{Action: HookTransform, Arguments: args}
}

// TransformResult returns the post_tool_use or subagent_stop decision that
// replaces the call's result with r ([HookTransform]).
func TransformResult(r *tool.Result) HookDecision {
	return HookDecision{Action: HookTransform, Result: r}
}

// TransformPrompt returns the user_prompt_submit, session_start or
// subagent_start decision that replaces the prompt with prompt
// ([HookTransform]).
func TransformPrompt(prompt string) HookDecision {
	return HookDecision{Action: HookTransform, Prompt: prompt}
}
