package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/calf-go/calf/agent/compaction"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent/internal/sessionstore"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/store/adapter"
)

// Status says what a session is doing.
type Status string

// Session statuses.
const (
	// Idle: no run of the session is in progress.
	Idle Status = "idle"
	// Running: a run of the session has started and not ended.
	Running Status = "running"
	// Paused: the session's runs in progress are all paused (agent's
	// Runtime.Pause, or a budget reached).
	Paused Status = "paused"
)

// Session is a conversation that outlives its runs: each run that names
// it (agent's RunOptions.SessionID) starts from its messages, and a run
// that completes adds its own. A Session returned here is the caller's to
// change: its messages share no memory with those a runtime keeps for the
// session's next run.
type Session struct {
	ID string `json:"id"`
	// Title is the session's title: set with [SetTitle], or the start of
	// its first prompt.
	Title    string          `json:"title,omitempty"`
	Messages []model.Message `json:"messages"`
	// Runs lists the session's runs that ended, oldest first: those that
	// completed or handed off added their messages.
	Runs []string `json:"runs,omitempty"`
	// Active lists the runs of the session that started and have not
	// ended.
	Active []string `json:"active,omitempty"`
	// Compacted, when set, is what the model sees in place of the first
	// messages of the conversation, as the last run that compacted it
	// left it (agent's Compaction).
	Compacted *compaction.Record `json:"compacted,omitempty"`
	// AllowedTools are the tools a person allowed for the rest of the
	// session when approving one of their calls: their calls in the
	// session's runs run without asking, until revoked.
	AllowedTools []string `json:"allowed_tools,omitempty"`
	// Usage is the sum of the usage of the session's runs, and Cost of
	// their cost.
	Usage model.Usage `json:"usage"`
	Cost  model.Cost  `json:"cost"`
	// Budget, when set, bounds what the session's runs spend together
	// (set with agent's Runtime.SetSessionBudget).
	Budget *Budget `json:"budget,omitempty"`
	// ForkedFrom names the session this one was forked from, if any.
	ForkedFrom *Origin   `json:"forked_from,omitempty"`
	CreatedAt  time.Time `json:"created_at,omitzero"`
	UpdatedAt  time.Time `json:"updated_at"`
}

// Origin names the origin of a forked session: the session, and how many
// of its messages the fork started with.
type Origin struct {
	Session  string `json:"session"`
	Messages int    `json:"messages"`
}

// Budget bounds what the runs of a session spend together, counted from
// what the session had spent when each run started. It has the fields of
// agent's Budget, which it is set from (agent's Runtime.SetSessionBudget).
type Budget struct {
	// MaxModelCalls bounds the model calls.
	MaxModelCalls int64 `json:"max_model_calls,omitempty"`
	// MaxTokens bounds the tokens (input and output).
	MaxTokens int64 `json:"max_tokens,omitempty"`
	// MaxCostUSD bounds the cost, in US dollars.
	MaxCostUSD float64 `json:"max_cost_usd,omitempty"`
	// Fail ends a run failed when the budget is reached, instead of
	// pausing it.
	Fail bool `json:"fail,omitempty"`
}

// Info describes a session without its messages.
type Info struct {
	ID     string `json:"id"`
	Title  string `json:"title,omitempty"`
	Status Status `json:"status"`
	// Messages is the number of messages; Runs the number of runs that
	// ended.
	Messages   int         `json:"messages"`
	Runs       int         `json:"runs"`
	Usage      model.Usage `json:"usage"`
	Cost       model.Cost  `json:"cost"`
	Budget     *Budget     `json:"budget,omitempty"`
	ForkedFrom *Origin     `json:"forked_from,omitempty"`
	CreatedAt  time.Time   `json:"created_at,omitzero"`
	UpdatedAt  time.Time   `json:"updated_at"`
}

// Errors of the package. A stored record that does not decode is an
// error matching agent's ErrCorruptState.
var (
	// ErrExists: a session with the id is stored already.
	ErrExists = sessionstore.ErrExists
	// ErrBusy: a run of the session is in progress, so messages cannot be
	// added to it ([Append]).
	ErrBusy = sessionstore.ErrBusy
	// ErrFormat: the data is not a session export this version of Calf
	// reads ([Import]).
	ErrFormat = errors.New("session: not a session export this version reads")
)

// sessions returns the sessions of s, for one operation.
func sessions(s store.Store) *sessionstore.Sessions { return sessionstore.New(s, nil, nil, false) }

// Load returns a stored session with its messages, or an error matching
// [store.ErrNotFound].
func Load(ctx context.Context, s store.Store, id string) (*Session, error) {
	ss := sessions(s)
	r, _, err := ss.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	msgs, err := ss.Messages(ctx, r)
	if err != nil {
		return nil, err
	}
	runs, err := ss.Runs(ctx, r)
	if err != nil {
		return nil, err
	}
	return &Session{ID: r.ID, Title: r.Title, Messages: model.CloneMessages(msgs), Runs: runs, Active: r.Active,
		Compacted: r.Compacted, AllowedTools: r.AllowedTools, Usage: r.Usage, Cost: r.Cost,
		Budget: (*Budget)(r.Budget), ForkedFrom: (*Origin)(r.ForkedFrom), CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}, nil
}

// LoadInfo describes a stored session without reading its messages, or
// returns an error matching [store.ErrNotFound].
func LoadInfo(ctx context.Context, s store.Store, id string) (*Info, error) {
	ss := sessions(s)
	r, _, err := ss.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	info, err := describe(ctx, ss, r)
	if err != nil {
		return nil, err
	}
	return &info, nil
}

// describe returns the Info of the session r.
func describe(ctx context.Context, ss *sessionstore.Sessions, r *sessionstore.Record) (Info, error) {
	status, err := ss.Status(ctx, r)
	return Info{ID: r.ID, Title: r.Title, Status: Status(status), Messages: r.Count, Runs: r.RunCount(), Usage: r.Usage, Cost: r.Cost,
		Budget: (*Budget)(r.Budget), ForkedFrom: (*Origin)(r.ForkedFrom), CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}, err
}

// ListOptions page through [List].
type ListOptions struct {
	// Limit is the most sessions a page holds: default 50, at most 1,000.
	Limit int
	// After is the Next of the previous page: empty for the first.
	After string
}

// Page is a page of [List].
type Page struct {
	Sessions []Info `json:"sessions"`
	// Next, when not empty, is the After of the next page.
	Next string `json:"next,omitempty"`
}

// List lists the stored sessions, newest (by creation) first, a page at a
// time.
func List(ctx context.Context, s store.Store, opts *ListOptions) (*Page, error) {
	var o ListOptions
	if opts != nil {
		o = *opts
	}
	switch {
	case o.Limit < 0 || o.Limit > 1000:
		return nil, fmt.Errorf("session: list: limit %d: give 1 to 1,000, or 0 for the default", o.Limit)
	case o.Limit == 0:
		o.Limit = 50
	}
	ss := sessions(s)
	recs, next, err := ss.List(ctx, o.Limit, o.After)
	if err != nil {
		return nil, err
	}
	page := &Page{Sessions: make([]Info, 0, len(recs)), Next: next}
	for _, r := range recs {
		info, err := describe(ctx, ss, r)
		if err != nil {
			return nil, err
		}
		page.Sessions = append(page.Sessions, info)
	}
	return page, nil
}

// Append adds msgs to the end of the stored session id without a run, so
// that the session's next run sees them, as it sees the messages of the
// runs before it. The messages must make a conversation on their own (see
// [Import]: a tool result answers a call of an assistant message among
// them, every call is answered). They are stored as a part of the
// session's messages and listed in the session's record with a
// compare-and-swap, so that appends and runs that end at the same time
// all keep theirs. It refuses an unknown session (an error matching
// [store.ErrNotFound]: create one with [Save] or a run), and a session
// with a run in progress with [ErrBusy], since the run did not start from
// the messages and adds its own after them; a run that starts while the
// append is made may not see them.
func Append(ctx context.Context, s store.Store, id string, msgs ...model.Message) error {
	return sessions(s).Append(ctx, id, msgs...)
}

// SetTitle sets the title of the stored session id, or returns an error
// matching [store.ErrNotFound].
func SetTitle(ctx context.Context, s store.Store, id, title string) error {
	return sessions(s).SetTitle(ctx, id, title)
}

// RevokeTool takes back the permission, given with an approval answered
// for the session (agent/approval's Answer.ForSession), to call the tool
// name in the stored session id without asking: the tool's next call in
// the session's runs asks again. Revoking what was not allowed does
// nothing; a session that does not exist gives an error matching
// [store.ErrNotFound].
func RevokeTool(ctx context.Context, s store.Store, id, name string) error {
	return sessions(s).SetToolAllowed(ctx, id, name, false)
}

// Save writes a session whole, replacing any stored one with its id: use
// it to restore a serialized conversation or to seed one. Its CreatedAt is
// kept when set; its Active runs are not (they are those of the store).
func Save(ctx context.Context, s store.Store, sess *Session) error {
	if sess.ID == "" {
		return errors.New("session: save: empty id")
	}
	return write(ctx, sessions(s), sess, "saved-"+calf.NewID()[:8], true)
}

// write stores sess whole, its messages as one part named part, over the
// stored session with its id when replace is set.
func write(ctx context.Context, ss *sessionstore.Sessions, sess *Session, part string, replace bool) error {
	r := &sessionstore.Record{ID: sess.ID, Title: sess.Title, Runs: slices.Clone(sess.Runs),
		Compacted: sess.Compacted, AllowedTools: sess.AllowedTools, Usage: sess.Usage, Cost: sess.Cost,
		Budget: (*sessionstore.Budget)(sess.Budget), ForkedFrom: (*sessionstore.Origin)(sess.ForkedFrom), CreatedAt: sess.CreatedAt}
	return ss.Write(ctx, r, sess.Messages, part, replace)
}

// Delete removes a stored session, its messages, the state custom agents
// kept in it and its index entry. Deleting a missing session is not an
// error.
func Delete(ctx context.Context, s store.Store, id string) error {
	return sessions(s).Delete(ctx, id)
}

// ForkOptions say how to fork a session.
type ForkOptions struct {
	// At is how many of the session's messages the fork starts with: 0
	// for all of them.
	At int
	// ID is the fork's id: default a new one.
	ID string
	// Title is the fork's title: default the session's.
	Title string
}

// Fork copies the first messages of the session id into a new session,
// independent of it: runs in either do not change the other. The fork
// keeps the session's allowed tools, and its compaction when it covers
// the fork's messages only. A fork from the end also copies the state the
// session's custom agents keep; a fork from an earlier message starts
// them from the zero state. It returns the fork, or [ErrExists] when its
// id is taken.
func Fork(ctx context.Context, s store.Store, id string, opts *ForkOptions) (*Session, error) {
	var o ForkOptions
	if opts != nil {
		o = *opts
	}
	src, err := Load(ctx, s, id)
	if err != nil {
		return nil, err
	}
	at := o.At
	switch {
	case at < 0 || at > len(src.Messages):
		return nil, fmt.Errorf("session: fork %s at message %d: it has %d", id, at, len(src.Messages))
	case at == 0:
		at = len(src.Messages)
	}
	fork := &Session{
		ID: o.ID, Title: o.Title, Messages: slices.Clone(src.Messages[:at]),
		AllowedTools: slices.Clone(src.AllowedTools), ForkedFrom: &Origin{Session: id, Messages: at},
	}
	if fork.ID == "" {
		fork.ID = calf.NewID()
	}
	if fork.Title == "" {
		fork.Title = src.Title
	}
	if c := src.Compacted; c != nil && c.Upto <= at {
		fork.Compacted = c
	}
	ss := sessions(s)
	if err := write(ctx, ss, fork, "fork", false); err != nil {
		return nil, fmt.Errorf("session: fork %s: %w", id, err)
	}
	if at == len(src.Messages) {
		if err := ss.CopyAgentStates(ctx, id, fork.ID); err != nil {
			return nil, fmt.Errorf("session: fork %s: %w", id, err)
		}
	}
	return Load(ctx, s, fork.ID)
}

// ExportFormat names the format of [Export]'s JSON.
const ExportFormat = "calf.session/v1"

// export is the JSON of an exported session.
type export struct {
	Format string `json:"format"`
	*Session
}

// Export returns the stored session id as versioned JSON
// ({"format": "calf.session/v1", "id": ..., "messages": [...], ...}),
// which [Import] reads back, in this process or another, on this store or
// another.
func Export(ctx context.Context, s store.Store, id string) ([]byte, error) {
	sess, err := Load(ctx, s, id)
	if err != nil {
		return nil, err
	}
	sess.Active = nil // runs of this store, not of the export
	return json.MarshalIndent(export{Format: ExportFormat, Session: sess}, "", "  ")
}

// ImportOptions say how to import a session.
type ImportOptions struct {
	// ID, when set, is the imported session's id instead of the export's.
	ID string
	// Replace lets the import replace a stored session with the same id.
	Replace bool
}

// Import stores a session exported by [Export] and returns it. It refuses
// data that is not such an export, of a newer format than this version
// reads, or whose messages do not make a conversation (a tool result that
// answers no call of the assistant message before it, or answers one
// again; calls left unanswered when the next turn starts or the
// conversation ends), with an error matching [ErrFormat] that names the
// first wrong message; and a session whose id is taken, unless
// opts.Replace, with [ErrExists].
func Import(ctx context.Context, s store.Store, data []byte, opts *ImportOptions) (*Session, error) {
	var o ImportOptions
	if opts != nil {
		o = *opts
	}
	sess, err := decodeExport(data)
	if err != nil {
		return nil, err
	}
	if o.ID != "" {
		sess.ID = o.ID
	}
	if err := write(ctx, sessions(s), sess, "import-"+calf.NewID()[:8], o.Replace); err != nil {
		return nil, fmt.Errorf("session: import %s: %w", sess.ID, err)
	}
	return Load(ctx, s, sess.ID)
}

// decodeExport decodes and checks an exported session.
func decodeExport(data []byte) (*Session, error) {
	var head struct {
		Format *string `json:"format"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrFormat, err)
	}
	if head.Format == nil {
		return nil, fmt.Errorf("%w: no format: not an export of a session", ErrFormat)
	}
	name, v, ok := strings.Cut(*head.Format, "/v")
	n, err := strconv.Atoi(v)
	if !ok || name != "calf.session" || err != nil || n < 1 {
		return nil, fmt.Errorf("%w: format %q is not a session export", ErrFormat, *head.Format)
	}
	if n > 1 {
		return nil, fmt.Errorf("%w: format %q is newer than this version of Calf reads (%s)", ErrFormat, *head.Format, ExportFormat)
	}
	var sess Session
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&export{Session: &sess}); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrFormat, err)
	}
	if sess.ID == "" {
		return nil, fmt.Errorf("%w: the session has no id", ErrFormat)
	}
	if err := adapter.CheckKey(store.KindSession, sess.ID); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrFormat, err)
	}
	if err := sessionstore.CheckConversation(sess.Messages); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrFormat, err)
	}
	if c := sess.Compacted; c != nil && (c.Upto < 0 || c.Upto > len(sess.Messages)) {
		return nil, fmt.Errorf("%w: the compaction stands for %d messages of %d", ErrFormat, c.Upto, len(sess.Messages))
	}
	return &sess, nil
}
