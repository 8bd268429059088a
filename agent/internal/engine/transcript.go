package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent/compaction"
	"github.com/calf-go/calf/agent/internal/records"
	"github.com/calf-go/calf/agent/internal/runstore"
	"github.com/calf-go/calf/agent/internal/sessionstore"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/store"
)

// Phase says what a running run waits for.
type Phase string

// Run phases.
const (
	// PhaseInference: the model call of the current step is due.
	PhaseInference Phase = "inference"
	// PhaseTools: the model answered with tool calls; their results are due.
	PhaseTools Phase = "tools"
)

// A Transcript is the conversation part of a run's stored record: its
// messages, where the first of them are kept when the record does not
// hold them (the session's history, archived chunks), what the model sees
// in place of the first (a compaction) and the size of its last input. A
// record embeds it, so that its fields are the record's, in place: their
// JSON is a stored format, as the record's is.
type Transcript struct {
	// Messages is the conversation without the system prompt: the session's
	// history, then this run's messages.
	Messages []model.Message `json:"messages"`
	// HistoryLen is how many of Messages came from the session.
	HistoryLen int `json:"history_len,omitempty"`
	// History, when set, says that the first HistoryLen messages are the
	// start of the run's session, kept there and not in the run's record:
	// the record holds the run's own messages only, so that what a step
	// writes does not grow with the session's length. A transcript decoded
	// from such a record holds only the run's messages until its history
	// is read back ([Transcript.ReadBack]).
	History *HistoryRef `json:"history,omitempty"`
	// Archived is how many of the messages the run's record would hold
	// (the run's own, or, for a history kept in the record, the history's
	// and the run's) are kept in run_messages records instead
	// (runstore.KindRunMessages), 8 to a record, written once each: the
	// record holds the rest, at most 15, so that a step of a long run
	// writes what it added, not the whole conversation again. A transcript
	// decoded from such a record holds those last messages only until the
	// others are read back.
	Archived int `json:"archived,omitempty"`
	// ArchivedCalls is how many of the run's tool call records are kept in
	// run_messages records, 8 to a record, as Archived is for the messages.
	ArchivedCalls int `json:"archived_calls,omitempty"`
	// Compacted, when set, is what the model sees in place of the first
	// messages of Messages (the agent's compaction).
	Compacted *compaction.Record `json:"compacted,omitempty"`
	// LastInput is the size of the input of the run's last model call, as
	// the model reported it, and how many messages (of what the model
	// sees, the instructions left out) it had.
	LastInput *InputSize `json:"last_input,omitempty"`

	// bare reports that Messages (and the record's tool calls) hold only
	// what the run's record holds: the history kept in the session and
	// the archived messages and tool calls are not read back yet.
	bare bool
}

// HistoryRef names the history a run started from when its session keeps
// it: the session's first messages, as many as the run's HistoryLen.
type HistoryRef struct {
	// Session is the session whose messages the history is.
	Session string `json:"session"`
	// Epoch is the session's epoch when the run started: a session
	// replaced since (saved over, imported over, deleted and created
	// again) has another, and no longer holds the history.
	Epoch string `json:"epoch,omitempty"`
}

// InputSize is the size of a model call's input.
type InputSize struct {
	Tokens   int `json:"tokens"`
	Messages int `json:"messages"`
}

// Decoded marks t, just decoded from a run's record, bare when the record
// leaves messages or tool calls out (History, Archived, ArchivedCalls),
// and checks what says where they are.
func (t *Transcript) Decoded() error {
	t.bare = t.History != nil || t.Archived > 0 || t.ArchivedCalls > 0
	switch {
	case t.History != nil && (t.History.Session == "" || t.HistoryLen <= 0):
		return fmt.Errorf("a history of %d messages in session %q", t.HistoryLen, t.History.Session)
	case t.Archived < 0 || t.Archived%runstore.Chunk != 0 || t.ArchivedCalls < 0 || t.ArchivedCalls%runstore.Chunk != 0:
		return fmt.Errorf("%d archived messages, %d archived tool calls", t.Archived, t.ArchivedCalls)
	}
	return nil
}

// Bare reports whether t holds only the messages its run's record holds:
// its history (kept in its session, see History) and its archived
// messages (Archived) not read back; the record's tool calls likewise.
func (t *Transcript) Bare() bool { return t.bare }

// SetBare sets what [Transcript.Bare] reports, for a copy of a transcript
// made through its JSON.
func (t *Transcript) SetBare(bare bool) { t.bare = bare }

// Tail returns the messages the run's record holds: those after the
// session's history and the archived ones. ok is false for a transcript
// whose counts do not fit its messages, which is stored as it is.
func (t *Transcript) Tail() (msgs []model.Message, ok bool) {
	if t.bare {
		return t.Messages, true
	}
	skip := t.Archived
	if t.History != nil {
		skip += t.HistoryLen
	}
	if skip > len(t.Messages) {
		return nil, false
	}
	return t.Messages[skip:], true
}

// CallsTail returns, of calls, the run's tool call records, those its
// record holds: those after the archived ones.
func CallsTail[C any](t *Transcript, calls []C) []C {
	if t.bare || t.ArchivedCalls > len(calls) {
		return calls
	}
	return calls[t.ArchivedCalls:]
}

// NewMessages returns the messages the run added to its session's
// history. Of a bare transcript whose messages were archived in part, it
// returns those its record holds.
func (t *Transcript) NewMessages() []model.Message {
	if t.bare {
		return t.Messages
	}
	if t.HistoryLen > len(t.Messages) {
		return nil
	}
	return t.Messages[t.HistoryLen:]
}

// View returns the messages the model sees of the conversation: the
// compacted stand-in for the first ones, if any, then the rest.
func (t *Transcript) View() []model.Message {
	c := t.Compacted
	if c == nil || c.Upto > len(t.Messages) {
		return t.Messages
	}
	v := make([]model.Message, 0, len(c.Messages)+len(t.Messages)-c.Upto)
	return append(append(v, c.Messages...), t.Messages[c.Upto:]...)
}

// ContextTokens estimates the tokens of a model request's messages: the
// estimate of each, or, when it is more, the input the model reported for
// the run's previous call (last, when the request still starts with what
// it saw then) plus the estimate of the messages since. A model that
// reports less than the estimate does not lower it.
func ContextTokens(estimate func(model.Message) int, last *InputSize, msgs []model.Message) int {
	n, since := 0, 0
	for i, m := range msgs {
		t := estimate(m)
		n += t
		if last != nil && i >= last.Messages {
			since += t
		}
	}
	if last != nil && last.Tokens > 0 && last.Messages <= len(msgs) {
		n = max(n, last.Tokens+since)
	}
	return n
}

// SameCompaction reports whether a and b are the same compaction.
func SameCompaction(a, b *compaction.Record) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Upto == b.Upto && a.Step == b.Step && len(a.Messages) == len(b.Messages)
}

// CheckCompacted reports a compactor's result that would make an invalid
// conversation.
func CheckCompacted(res *compaction.Result) error {
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

// ArchiveMessages moves the first messages of the record of run, whose
// transcript t is, to chunks in s while the record would hold 16 or more,
// before the record is written. A chunk's content is the same whoever
// writes it (a run's messages only grow at their end), so a write whose
// compare-and-swap then conflicts leaves a chunk the next attempt writes
// again, the same.
func (t *Transcript) ArchiveMessages(ctx context.Context, s store.Store, run string) error {
	tail, ok := t.Tail()
	if !ok {
		return nil
	}
	for len(tail) >= 2*runstore.Chunk {
		if err := runstore.PutChunk(ctx, s, run, 'm', t.Archived/runstore.Chunk, tail[:runstore.Chunk]); err != nil {
			return err
		}
		t.Archived += runstore.Chunk
		tail = tail[runstore.Chunk:]
		if t.bare {
			t.Messages = tail
		}
	}
	return nil
}

// ReadBack makes the messages of t, bare, whole: the history its session
// keeps (read through sessions) and its archived messages (read from s)
// go before its messages. The caller reads back the record's tool calls
// (ArchivedCalls) before, as [Transcript.Bare] no longer reports t bare
// after.
func (t *Transcript) ReadBack(ctx context.Context, s store.Store, sessions *sessionstore.Sessions, run string) error {
	if !t.bare {
		return nil
	}
	archived, err := runstore.ReadChunks[model.Message](ctx, s, run, 'm', t.Archived)
	if err != nil {
		return err
	}
	if t.History == nil {
		t.Messages = slices.Concat(archived, t.Messages)
		t.bare = false
		return nil
	}
	ref := t.History
	r, _, err := sessions.Get(ctx, ref.Session)
	if errors.Is(err, store.ErrNotFound) {
		return calf.Permanent(fmt.Errorf("%w: run %s: its history was in session %s, which is gone", records.ErrCorrupt, run, ref.Session))
	}
	if err != nil {
		return err
	}
	if r.Epoch != ref.Epoch || r.Count < t.HistoryLen {
		return calf.Permanent(fmt.Errorf("%w: run %s: its history was the first %d messages of session %s, which was replaced since", records.ErrCorrupt, run, t.HistoryLen, ref.Session))
	}
	msgs, err := sessions.Messages(ctx, r)
	if err != nil {
		return err
	}
	if len(msgs) < t.HistoryLen {
		return calf.Permanent(fmt.Errorf("%w: run %s: session %s holds %d messages of its history of %d", records.ErrCorrupt, run, ref.Session, len(msgs), t.HistoryLen))
	}
	t.Messages = slices.Concat(msgs[:t.HistoryLen:t.HistoryLen], archived, t.Messages)
	t.bare = false
	return nil
}
