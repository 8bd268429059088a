package host

import (
	"context"
	"errors"
	"fmt"

	"github.com/calf-go/calf/agent/session"
	"github.com/calf-go/calf/store"
)

// ToolCall is one call an LLM instance made while it answered a message:
// a command it sent (send), a subagent it started (start_conversation) or
// a built-in tool's call, with the result it got. [Host.ToolContext]
// returns them.
type ToolCall struct {
	// Run is the run that made the call: one per message answered (and
	// per "# Run" round).
	Run string `json:"run"`
	// Tool is the tool's name; Arguments its arguments as JSON.
	Tool      string `json:"tool"`
	Arguments string `json:"arguments"`
	// Status is the call's status (agent's StatusSuccess,
	// StatusError, ...), Result the text the model got back.
	Status string `json:"status"`
	Result string `json:"result,omitempty"`
}

// ToolContext returns the tool context of the LLM instance: the calls its
// runs made and the results they got, oldest first, from the records of
// the last runs of its session (at most runs of them; all when runs is 0).
// These are what the instance's user-facing context, its session, leaves
// out (see [Options.KeepToolTraffic]); the runs' records stay until
// the runtime's retention sweeps them (agent's Runtime.Sweep), and a run
// swept is skipped. An instance that has answered nothing has none.
func (h *Host) ToolContext(ctx context.Context, instance string, runs int) ([]ToolCall, error) {
	sess, err := session.Load(ctx, h.rt.Store(), instance)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("conversation: tool context of %s: %w", instance, err)
	}
	ids := sess.Runs
	if runs > 0 && len(ids) > runs {
		ids = ids[len(ids)-runs:]
	}
	var out []ToolCall
	for _, id := range ids {
		info, err := h.rt.LoadAgentRun(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("conversation: tool context of %s: %w", instance, err)
		}
		for _, c := range info.ToolCalls {
			tc := ToolCall{Run: id, Tool: c.Name, Arguments: c.Arguments, Status: c.Status}
			if c.Result != nil {
				tc.Result = c.Result.Text()
			}
			out = append(out, tc)
		}
	}
	return out, nil
}
