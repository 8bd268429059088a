package agent

import (
	"context"
	"slices"

	"github.com/calf-go/calf/agent/internal/engine"
	"github.com/calf-go/calf/model"
)

// Memory gives an agent what it remembers: before each of a run's model
// calls, UpdateContext may return messages that the model sees after the
// instructions and before the conversation, such as the facts that match
// the user's question. They are not recorded in the run's conversation.
// The package recall has a vector memory and a conversation memory.
//
// A failing memory does not fail the run: the failure is logged and the
// call is made without what it would have added.
type Memory interface {
	UpdateContext(ctx context.Context, in *MemoryContext) ([]model.Message, error)
}

// A Rememberer is a [Memory] that is told of each run of the agent that
// completes, with the messages the run added, so that it can keep what
// matters. It is told at least once per run.
type Rememberer interface {
	Remember(ctx context.Context, in *MemoryContext, added []model.Message) error
}

// MemoryContext is what a [Memory] is called with.
type MemoryContext struct {
	Agent     string
	RunID     string
	SessionID string
	// Step is the model call about to be made, from 1.
	Step int
	// Messages are the run's conversation as the model is to see it (the
	// instructions left out): a copy, the memory's to change.
	Messages []model.Message
}

// memoryStage is the inference stage of an agent with memories: what
// they add goes into the request, after the instructions.
func (h *handlers) memoryStage(ctx context.Context, inf *inference) (bool, error) {
	st, req := inf.st, inf.req
	if add := h.memoryMessages(ctx, st, st.View()); len(add) > 0 {
		at := 0
		if len(req.Messages) > 0 && req.Messages[0].Role == model.RoleSystem && len(req.Messages) > len(st.View()) {
			at = 1 // after the instructions
		}
		req.Messages = slices.Concat(req.Messages[:at:at], add, req.Messages[at:])
	}
	return false, nil
}

// memoryMessages returns the messages the agent's memories add to the
// model call of the run st whose conversation is msgs.
func (h *handlers) memoryMessages(ctx context.Context, st *runState, msgs []model.Message) []model.Message {
	var out []model.Message
	in := &MemoryContext{Agent: h.a.name, RunID: st.RunID, SessionID: st.SessionID, Step: st.Step, Messages: model.CloneMessages(msgs)}
	for _, m := range h.a.opts.Memory {
		add, err := engine.CallWithin(ctx, h.within(st, h.a.opts.ModelTimeout), func(ctx context.Context) ([]model.Message, error) {
			return m.UpdateContext(ctx, in)
		})
		if err != nil {
			if ctx.Err() == nil {
				h.rt.log.Warn("agent: memory not read", "agent", h.a.name, "run", st.RunID, "step", st.Step, "err", err)
			}
			continue
		}
		out = append(out, add...)
	}
	return out
}

// remember tells the agent's memories that can keep it that the run st
// completed.
func (h *handlers) remember(ctx context.Context, st *runState) {
	if err := h.rt.readBack(ctx, st); err != nil {
		h.rt.log.Warn("agent: run not remembered", "agent", h.a.name, "run", st.RunID, "err", err)
		return
	}
	msgs := model.CloneMessages(st.Messages) // the memory's to change
	added := msgs[len(msgs)-len(st.NewMessages()):]
	in := &MemoryContext{Agent: h.a.name, RunID: st.RunID, SessionID: st.SessionID, Step: st.Step, Messages: msgs}
	for _, m := range h.a.opts.Memory {
		r, ok := m.(Rememberer)
		if !ok {
			continue
		}
		_, err := engine.CallWithin(ctx, h.within(st, h.a.opts.ModelTimeout), func(ctx context.Context) (struct{}, error) {
			return struct{}{}, r.Remember(ctx, in, added)
		})
		if err != nil && ctx.Err() == nil {
			h.rt.log.Warn("agent: run not remembered", "agent", h.a.name, "run", st.RunID, "err", err)
		}
	}
}
