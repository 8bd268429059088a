package agent

import (
	"cmp"
	"context"
	"slices"
	"strconv"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent/compaction"
	"github.com/calf-go/calf/agent/internal/engine"
	"github.com/calf-go/calf/model"
)

// The engine's part of context compaction ([Options.Compaction]; the
// strategies and their configuration are in package compaction): when to
// compact, the compacted view in the run's state, and the event that
// reports it.

// estimator returns c.Estimate or its default.
func estimator(c *compaction.Config) func(model.Message) int {
	if c.Estimate != nil {
		return c.Estimate
	}
	return compaction.EstimateTokens
}

// compactor returns c.Compactor or its default.
func compactor(c *compaction.Config) compaction.Compactor {
	if c.Compactor != nil {
		return c.Compactor
	}
	return compaction.DropToolResults()
}

// ContextCompactedEvent is the payload of an agent's context_compacted
// channel: a run's context was compacted (see [Options.Compaction])
// before the model call of Step. Its message id is
// "{run}.context_compacted.{step}".
type ContextCompactedEvent struct {
	Step int `json:"step"`
	// From and To are the context's estimated tokens before and after.
	From int `json:"from"`
	To   int `json:"to"`
	// Replaced is how many messages of the conversation the compacted
	// ones (Messages) stand for.
	Replaced int `json:"replaced"`
	Messages int `json:"messages"`
}

// contextCompactedChannel returns the channel of an agent's compactions.
func contextCompactedChannel(agent string) string {
	return channelPrefix + agent + "." + suffixContextCompacted
}

const suffixContextCompacted = "context_compacted"

// compactStage is the inference stage of an agent with compaction: it
// compacts the run's context when the request passes the threshold, and
// makes the request again from the compacted context.
func (h *handlers) compactStage(ctx context.Context, inf *inference) (bool, error) {
	var err error
	if inf.st, inf.version, err = h.compact(ctx, inf.st, inf.version, inf.req); err != nil {
		return true, err
	}
	if inf.req, err = h.request(inf.rc, inf.st); err != nil {
		return true, h.requestFailed(ctx, inf.st, err)
	}
	return false, nil
}

// compact compacts the context of the run st before the model call of its
// current step when it is over the threshold, unless a pre_compact hook
// denies it, and returns the state the request is made from. A compactor
// that fails leaves the context as it is: the run goes on.
func (h *handlers) compact(ctx context.Context, st *runState, version int64, req *model.Request) (*runState, int64, error) {
	c := h.a.opts.Compaction
	if cc := st.Compacted; cc != nil && cc.Step == st.Step {
		// Compacted by a delivery that did not get to the model call.
		return st, version, h.emitCompacted(ctx, st)
	}
	tokens := engine.ContextTokens(estimator(c), st.LastInput, req.Messages)
	if tokens <= c.Threshold {
		return st, version, nil
	}
	if h.a.hasHooks(HookPreCompact) {
		o := h.a.runHooks(ctx, HookPreCompact, HookInput{
			Event: HookPreCompact, Agent: h.a.name, RunID: st.RunID, SessionID: st.SessionID, Step: st.Step, Tokens: tokens,
		})
		if ctx.Err() != nil {
			return st, version, ctx.Err()
		}
		if err := h.emitHookDecisions(ctx, st.metadata(), HookDecisionEvent{Event: HookPreCompact, Step: st.Step, Decisions: o.records}); err != nil {
			return st, version, err
		}
		if o.denied != "" {
			return st, version, nil
		}
	}
	view := st.View()
	prefix, upto := 0, 0 // the compacted messages in view, and the conversation's messages they stand for
	if st.Compacted != nil && st.Compacted.Upto <= len(st.Messages) {
		prefix, upto = len(st.Compacted.Messages), st.Compacted.Upto
	}
	split := max(len(view)-cmp.Or(c.KeepRecent, compaction.DefaultKeepRecent), prefix)
	for split > 0 && split < len(view) && view[split].Role == model.RoleTool {
		split-- // keep a call's results with the call
	}
	if split < prefix || split == 0 {
		return st, version, nil // nothing older than what must be kept
	}
	estimate := estimator(c)
	kept := 0
	for _, m := range view[split:] {
		kept += estimate(m)
	}
	system := req.Messages[:len(req.Messages)-len(view)] // the instructions
	in := &compaction.Input{
		Agent: h.a.name, RunID: st.RunID, SessionID: st.SessionID, Step: st.Step,
		Messages: model.CloneMessages(view[:split]), Tokens: tokens, Threshold: c.Threshold,
		Target: max(c.Threshold/2-kept-engine.ContextTokens(estimate, nil, system), 1), Estimate: estimate,
	}
	res, err := engine.CallWithin(ctx, h.within(st, h.a.opts.ModelTimeout), func(ctx context.Context) (*compaction.Result, error) {
		return compactor(c).Compact(ctx, in)
	})
	if err == nil {
		err = engine.CheckCompacted(res)
	}
	if err != nil {
		if ctx.Err() != nil {
			return st, version, ctx.Err()
		}
		h.rt.log.Warn("agent: context not compacted", "agent", h.a.name, "run", st.RunID, "step", st.Step, "tokens", tokens, "err", err)
		return st, version, nil
	}
	compacted := &compaction.Record{Upto: upto + split - prefix, Messages: res.Messages, Step: st.Step, From: tokens}
	probe := &engine.Transcript{Messages: st.Messages, Compacted: compacted}
	compacted.To = engine.ContextTokens(estimate, nil, append(slices.Clip(system), probe.View()...))
	before, step := st.Compacted, st.Step
	st, err = h.rt.runs.UpdateFrom(ctx, st, version, func(cur *runState) (bool, error) {
		if cur.Status.Terminal() || cur.Step != step || cur.Phase != phaseInference || !engine.SameCompaction(cur.Compacted, before) {
			return false, nil
		}
		cur.Compacted, cur.LastInput = compacted, nil
		cur.Usage = cur.Usage.Add(res.Usage)
		cur.Cost = cur.Cost.Add(h.rt.prices.CostOf(res.Model, res.Usage))
		return true, nil
	})
	if err != nil {
		return st, version, err
	}
	if st.Compacted == nil || st.Compacted.Step != st.Step {
		return st, version, nil // another delivery got there first, or the run moved on
	}
	// The version written, or -1 when unknown: the next write then reads
	// the run again.
	return st, h.rt.runs.Version(st.RunID), h.emitCompacted(ctx, st)
}

// emitCompacted publishes the compaction of the run's current step.
func (h *handlers) emitCompacted(ctx context.Context, st *runState) error {
	c := st.Compacted
	ev := ContextCompactedEvent{Step: c.Step, From: c.From, To: c.To, Replaced: c.Upto, Messages: len(c.Messages)}
	_, err := h.rt.client.Emit(ctx, contextCompactedChannel(h.a.name), ev,
		calf.WithID(st.RunID+"."+suffixContextCompacted+"."+strconv.Itoa(c.Step)), calf.WithKey(st.RunID), calf.WithMetadata(st.metadata()))
	return err
}
