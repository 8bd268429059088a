package compaction

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/calf-go/calf/model"
)

// DefaultKeepRecent is the default of [Config.KeepRecent].
const DefaultKeepRecent = 6

// Config is an agent's compaction (its Options.Compaction): it keeps a
// run's context within a budget of tokens. Before a model call whose
// messages are estimated at more than Threshold tokens, the older messages
// are handed to the Compactor, and the model sees what it returns in
// their place, followed by the latest messages as they are.
//
// The run's state and its session keep every message: compaction changes
// what the model sees, not what is recorded. The compacted view ([Record])
// is stored with the run (so a redelivered or resumed step does not
// compact again) and, when the run completes, with its session, so the
// session's next run starts from it. Each compaction is published as an
// event of the run (a context_compacted event).
type Config struct {
	// Threshold is the estimated size, in tokens, of a model call's
	// messages (the instructions included) above which the context is
	// compacted before the call. Required.
	Threshold int
	// KeepRecent is how many of the latest messages the model always sees
	// as they are: the compactor gets the messages before them (moved back
	// so that a tool call and its results stay together). Default
	// [DefaultKeepRecent].
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

// A Compactor returns a shorter stand-in for the older messages of a run's
// context. It runs in the worker that makes the model call, again if the
// call's event is delivered again before the result was recorded.
type Compactor interface {
	Compact(ctx context.Context, in *Input) (*Result, error)
}

// Func is a function that is a [Compactor].
type Func func(ctx context.Context, in *Input) (*Result, error)

// Compact calls f.
func (f Func) Compact(ctx context.Context, in *Input) (*Result, error) {
	return f(ctx, in)
}

// Input is what a [Compactor] is given.
type Input struct {
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

// Result is what a [Compactor] returns.
type Result struct {
	// Messages stand in for the input's Messages. They must not end with
	// an assistant message that calls tools, nor start with tool results.
	Messages []model.Message
	// Usage is what compacting cost, when it called a model, and Model
	// that model's name: they are added to the run's usage and cost.
	Usage model.Usage
	Model string
}

// Record is what the model sees of a conversation's first messages after
// a compaction: Messages stand for the first Upto messages. A run's
// state and its session store it.
type Record struct {
	Upto     int             `json:"upto"`
	Messages []model.Message `json:"messages"`
	// Step is the step of the run that compacted; From and To are the
	// context's estimated tokens before and after.
	Step int `json:"step,omitempty"`
	From int `json:"from,omitempty"`
	To   int `json:"to,omitempty"`
}

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
	return Func(func(_ context.Context, in *Input) (*Result, error) {
		out := make([]model.Message, len(in.Messages))
		for i, m := range in.Messages {
			if m.Role == model.RoleTool {
				m.Parts = []model.Part{model.TextPart("[this tool result was removed to save context]")}
			}
			out[i] = m
		}
		return &Result{Messages: out}, nil
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
	return Func(func(ctx context.Context, in *Input) (*Result, error) {
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
		return &Result{
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
