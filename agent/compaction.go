package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent/internal/sessionstore"
	"github.com/calf-go/calf/model"
)

// Compaction keeps a run's context within a budget of tokens: before a
// model call whose messages are estimated at more than Threshold tokens,
// the older messages are handed to the Compactor, and the model sees what
// it returns in their place, followed by the latest messages as they are.
//
// The run's state and its session keep every message: compaction changes
// what the model sees, not what is recorded. The compacted view is stored
// with the run (so a redelivered or resumed step does not compact again)
// and, when the run completes, with its session, so the session's next run
// starts from it. Each compaction publishes a [ContextCompactedEvent].
type Compaction struct {
	// Threshold is the estimated size, in tokens, of a model call's
	// messages (the instructions included) above which the context is
	// compacted before the call. Required.
	Threshold int
	// KeepRecent is how many of the latest messages the model always sees
	// as they are: the compactor gets the messages before them (moved back
	// so that a tool call and its results stay together). Default 6.
	KeepRecent int
	// Compactor compacts. Default [DropToolResults].
	Compactor Compactor
	// Estimate returns the tokens of a message. Default [EstimateTokens];
	// model/tokens counts them with the tokenizer of OpenAI's models.
	// Where the model reported the size of the previous call's input, and
	// that plus the estimate of the messages since is more than the
	// estimate of them all, it is the context's size.
	Estimate func(model.Message) int
}

// estimator returns c.Estimate or its default.
func (c *Compaction) estimator() func(model.Message) int {
	if c.Estimate != nil {
		return c.Estimate
	}
	return EstimateTokens
}

// compactor returns c.Compactor or its default.
func (c *Compaction) compactor() Compactor {
	if c.Compactor != nil {
		return c.Compactor
	}
	return DropToolResults()
}

// DefaultKeepRecent is the default of [Compaction.KeepRecent].
const DefaultKeepRecent = 6

// A Compactor returns a shorter stand-in for the older messages of a run's
// context. It runs in the worker that makes the model call, again if the
// call's event is delivered again before the result was recorded.
type Compactor interface {
	Compact(ctx context.Context, in *CompactionInput) (*CompactionResult, error)
}

// CompactorFunc is a function that is a [Compactor].
type CompactorFunc func(ctx context.Context, in *CompactionInput) (*CompactionResult, error)

// Compact calls f.
func (f CompactorFunc) Compact(ctx context.Context, in *CompactionInput) (*CompactionResult, error) {
	return f(ctx, in)
}

// CompactionInput is what a [Compactor] is given.
type CompactionInput struct {
	Agent     string
	RunID     string
	SessionID string
	Step      int
	// Messages are the messages to stand in for, as the model sees them
	// now (an earlier compaction's result first, when there was one): a
	// copy, the compactor's to change.
	Messages []model.Message
	// Tokens is the estimate of the whole context, Threshold the
	// agent's, and Target the most that Messages should come to for the
	// context to fall to half the threshold.
	Tokens, Threshold, Target int
	// Estimate returns the tokens of a message.
	Estimate func(model.Message) int
}

// CompactionResult is what a [Compactor] returns.
type CompactionResult struct {
	// Messages stand in for the input's Messages. They must not end with
	// an assistant message that calls tools, nor start with tool results.
	Messages []model.Message
	// Usage is what compacting cost, when it called a model, and Model
	// that model's name: they are added to the run's usage and cost.
	Usage model.Usage
	Model string
}

// ContextCompactedEvent is the payload of an agent's context_compacted
// channel ([ContextCompactedChannel]): a run's context was compacted
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

// ContextCompactedChannel returns the channel of an agent's compactions.
func ContextCompactedChannel(agent string) string {
	return channelPrefix + agent + "." + suffixContextCompacted
}

const suffixContextCompacted = "context_compacted"

// EstimateTokens estimates the tokens of a message without a tokenizer:
// about four bytes of text a token, a few for the message's framing, and
// 1,000 for an image.
func EstimateTokens(m model.Message) int {
	n := 4 + len(m.ToolCallID)/4 + len(m.ToolName)/4
	for _, p := range m.Parts {
		if p.Type == model.PartImage {
			n += 1000
			continue
		}
		n += (len(p.Text) + 3) / 4
	}
	for _, c := range m.ToolCalls {
		n += 4 + (len(c.Name)+len(c.Arguments)+len(c.ID)+3)/4
	}
	return n
}

// DropToolResults returns the compactor that keeps the messages but
// replaces the content of their tool results with a short note: the model
// still sees which tools it called, with which arguments, but not what
// they returned. It costs no model call.
func DropToolResults() Compactor {
	return CompactorFunc(func(_ context.Context, in *CompactionInput) (*CompactionResult, error) {
		out := make([]model.Message, len(in.Messages))
		for i, m := range in.Messages {
			if m.Role == model.RoleTool {
				m.Parts = []model.Part{model.TextPart("[this tool result was removed to save context]")}
			}
			out[i] = m
		}
		return &CompactionResult{Messages: out}, nil
	})
}

// DefaultSummaryInstructions are the instructions of [Summarize]'s model
// when it is given none.
const DefaultSummaryInstructions = "You summarize a conversation between a user and an AI assistant, so that the assistant " +
	"can go on without it. Keep what was asked, decided and done, names, numbers, file paths, tool results that " +
	"still matter, and what remains open. Write it as notes, in the conversation's language, without preamble."

// Summarize returns the compactor that asks m for a summary of the older
// messages and puts it, as one user message, in their place. instructions
// are the summarizing model's system prompt ([DefaultSummaryInstructions]
// when empty). The summary's usage counts as the run's.
func Summarize(m model.Model, instructions string) Compactor {
	instructions = cmp.Or(instructions, DefaultSummaryInstructions)
	return CompactorFunc(func(ctx context.Context, in *CompactionInput) (*CompactionResult, error) {
		var b strings.Builder
		for _, msg := range in.Messages {
			writeTranscript(&b, msg)
		}
		req := &model.Request{Messages: []model.Message{
			model.SystemMessage(instructions),
			model.UserMessage("Summarize this conversation in at most " + strconv.Itoa(max(in.Target*3/4, 64)) + " tokens:\n\n" + b.String()),
		}}
		resp, err := m.Generate(ctx, req)
		if err != nil {
			return nil, fmt.Errorf("summarize: %w", err)
		}
		text := strings.TrimSpace(resp.Message.Text())
		if text == "" {
			return nil, errors.New("summarize: the model answered with no text")
		}
		u := resp.Usage
		if u.Requests == 0 {
			u.Requests = 1
		}
		return &CompactionResult{
			Messages: []model.Message{model.UserMessage("[A summary of the earlier conversation]\n" + text)},
			Usage:    u, Model: cmp.Or(resp.Model, m.Name()),
		}, nil
	})
}

// writeTranscript writes a message as a summarizer reads it.
func writeTranscript(b *strings.Builder, m model.Message) {
	switch m.Role {
	case model.RoleTool:
		fmt.Fprintf(b, "[tool result of %s]", m.ToolName)
		if m.IsError {
			b.WriteString(" (error)")
		}
	default:
		fmt.Fprintf(b, "[%s]", m.Role)
	}
	b.WriteString(" ")
	b.WriteString(m.Text())
	for _, p := range m.Parts {
		if p.Type == model.PartImage {
			b.WriteString(" [an image]")
		}
	}
	for _, c := range m.ToolCalls {
		fmt.Fprintf(b, "\n  called %s(%s)", c.Name, c.Arguments)
	}
	b.WriteString("\n")
}

// view returns the messages the model sees of the run's conversation: the
// compacted stand-in for the first ones, if any, then the rest.
func (s *runState) view() []model.Message {
	c := s.Compacted
	if c == nil || c.Upto > len(s.Messages) {
		return s.Messages
	}
	v := make([]model.Message, 0, len(c.Messages)+len(s.Messages)-c.Upto)
	return append(append(v, c.Messages...), s.Messages[c.Upto:]...)
}

// contextTokens estimates the tokens of a model request's messages: the
// estimate of each, or, when it is more, the input the model reported for
// the run's previous call (when the request still starts with what it saw
// then) plus the estimate of the messages since. A model that reports
// less than the estimate does not lower it.
func (c *Compaction) contextTokens(st *runState, msgs []model.Message) int {
	estimate := c.estimator()
	n, since := 0, 0
	li := st.LastInput
	for i, m := range msgs {
		t := estimate(m)
		n += t
		if li != nil && i >= li.Messages {
			since += t
		}
	}
	if li != nil && li.Tokens > 0 && li.Messages <= len(msgs) {
		n = max(n, li.Tokens+since)
	}
	return n
}

// compactStage is the inference stage of an agent with compaction: it
// compacts the run's context when the request passes the threshold, and
// makes the request again from the compacted context.
func (h *handlers[Out]) compactStage(ctx context.Context, inf *inference) (bool, error) {
	var err error
	if inf.st, inf.version, err = h.compact(ctx, inf.st, inf.version, inf.req); err != nil {
		return true, err
	}
	inf.req = h.request(inf.rc, inf.st)
	return false, nil
}

// compact compacts the context of the run st before the model call of its
// current step when it is over the threshold, unless a pre_compact hook
// denies it, and returns the state the request is made from. A compactor
// that fails leaves the context as it is: the run goes on.
func (h *handlers[Out]) compact(ctx context.Context, st *runState, version int64, req *model.Request) (*runState, int64, error) {
	c := h.a.opts.Compaction
	if cc := st.Compacted; cc != nil && cc.Step == st.Step {
		// Compacted by a delivery that did not get to the model call.
		return st, version, h.emitCompacted(ctx, st)
	}
	tokens := c.contextTokens(st, req.Messages)
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
	view := st.view()
	prefix, upto := 0, 0 // the compacted messages in view, and the conversation's messages they stand for
	if st.Compacted != nil && st.Compacted.Upto <= len(st.Messages) {
		prefix, upto = len(st.Compacted.Messages), st.Compacted.Upto
	}
	split := max(len(view)-cmp.Or(c.KeepRecent, DefaultKeepRecent), prefix)
	for split > 0 && split < len(view) && view[split].Role == model.RoleTool {
		split-- // keep a call's results with the call
	}
	if split < prefix || split == 0 {
		return st, version, nil // nothing older than what must be kept
	}
	estimate := c.estimator()
	kept := 0
	for _, m := range view[split:] {
		kept += estimate(m)
	}
	system := req.Messages[:len(req.Messages)-len(view)] // the instructions
	in := &CompactionInput{
		Agent: h.a.name, RunID: st.RunID, SessionID: st.SessionID, Step: st.Step,
		Messages: model.CloneMessages(view[:split]), Tokens: tokens, Threshold: c.Threshold,
		Target: max(c.Threshold/2-kept-c.contextTokens(&runState{}, system), 1), Estimate: estimate,
	}
	res, err := callWithin(ctx, h.within(st, h.a.opts.ModelTimeout), func(ctx context.Context) (*CompactionResult, error) {
		return c.compactor().Compact(ctx, in)
	})
	if err == nil {
		err = checkCompacted(res)
	}
	if err != nil {
		if ctx.Err() != nil {
			return st, version, ctx.Err()
		}
		h.rt.log.Warn("agent: context not compacted", "agent", h.a.name, "run", st.RunID, "step", st.Step, "tokens", tokens, "err", err)
		return st, version, nil
	}
	compacted := &sessionstore.Compacted{Upto: upto + split - prefix, Messages: res.Messages, Step: st.Step, From: tokens}
	probe := &runState{Messages: st.Messages, Compacted: compacted}
	compacted.To = c.contextTokens(&runState{}, append(slices.Clip(system), probe.view()...))
	before, step := st.Compacted, st.Step
	st, err = h.rt.runs.updateFrom(ctx, st, version, func(cur *runState) (bool, error) {
		if cur.Status.Terminal() || cur.Step != step || cur.Phase != phaseInference || !sameCompaction(cur.Compacted, before) {
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
	return st, h.rt.runs.version(st.RunID), h.emitCompacted(ctx, st)
}

// sameCompaction reports whether a and b are the same compaction.
func sameCompaction(a, b *sessionstore.Compacted) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Upto == b.Upto && a.Step == b.Step && len(a.Messages) == len(b.Messages)
}

// checkCompacted reports a compactor's result that would make an invalid
// conversation.
func checkCompacted(res *CompactionResult) error {
	if res == nil {
		return errors.New("the compactor returned no result")
	}
	if n := len(res.Messages); n > 0 {
		if res.Messages[0].Role == model.RoleTool {
			return errors.New("the compacted messages start with a tool result")
		}
		if last := res.Messages[n-1]; last.Role == model.RoleAssistant && len(last.ToolCalls) > 0 {
			return errors.New("the compacted messages end with tool calls")
		}
	}
	return nil
}

// emitCompacted publishes the compaction of the run's current step.
func (h *handlers[Out]) emitCompacted(ctx context.Context, st *runState) error {
	c := st.Compacted
	ev := ContextCompactedEvent{Step: c.Step, From: c.From, To: c.To, Replaced: c.Upto, Messages: len(c.Messages)}
	_, err := h.rt.client.Emit(ctx, ContextCompactedChannel(h.a.name), ev,
		calf.WithID(st.RunID+"."+suffixContextCompacted+"."+strconv.Itoa(c.Step)), calf.WithKey(st.RunID), calf.WithMetadata(st.metadata()))
	return err
}
