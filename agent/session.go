package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/store"
)

// Record kinds of sessions, besides [store.KindSession], which holds a
// session's description.
const (
	// KindSessionMessages holds a part of a session's messages: the
	// messages one run added, or those a session was imported or forked
	// with. Its id is "{len(session id)}:{session id}/{part}".
	KindSessionMessages = "session_messages"
	// KindSessionIndex lists the sessions, newest first: one empty record
	// per session, with the id "{inverted creation time, 16 hex
	// digits}/{session id}".
	KindSessionIndex = "session_index"
	// KindSessionChunk holds a chunk of a long session's list of parts
	// or of runs, so that the session's own record stays small: its id is
	// "{len(session id)}:{session id}/{epoch}/{p or r}{chunk, 8 digits}".
	KindSessionChunk = "session_chunk"
)

// SessionStatus says what a session is doing.
type SessionStatus string

// Session statuses.
const (
	// SessionIdle: no run of the session is in progress.
	SessionIdle SessionStatus = "idle"
	// SessionRunning: a run of the session has started and not ended.
	SessionRunning SessionStatus = "running"
	// SessionPaused: the session's runs in progress are all paused
	// ([Runtime.Pause], or a budget reached).
	SessionPaused SessionStatus = "paused"
)

// Session is a conversation that outlives its runs: each run that names
// it ([RunOptions.SessionID]) starts from its messages, and a run that
// completes adds its own. It is stored as a description
// ([store.KindSession]) and parts of messages ([KindSessionMessages]),
// one per run, so that a run adds to a session without rewriting it. A
// Session returned by the runtime is the caller's to change: its messages
// share no memory with those the runtime keeps for the session's next run.
type Session struct {
	ID string `json:"id"`
	// Title is the session's title: set with [Runtime.SetSessionTitle],
	// or the start of its first prompt.
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
	// left it; see [Compaction].
	Compacted *CompactedContext `json:"compacted,omitempty"`
	// AllowedTools are the tools a person allowed for the rest of the
	// session when approving one of their calls
	// ([ApprovalAnswer.ForSession]): their calls in the session's runs
	// run without asking, until [Runtime.RevokeSessionTool].
	AllowedTools []string `json:"allowed_tools,omitempty"`
	// Usage is the sum of the usage of the session's runs, and Cost of
	// their cost (see [Output.Cost]).
	Usage model.Usage `json:"usage"`
	Cost  model.Cost  `json:"cost"`
	// Budget, when set, bounds what the session's runs spend together;
	// see [Runtime.SetSessionBudget].
	Budget *Budget `json:"budget,omitempty"`
	// ForkedFrom names the session this one was forked from, if any.
	ForkedFrom *SessionFork `json:"forked_from,omitempty"`
	CreatedAt  time.Time    `json:"created_at,omitzero"`
	UpdatedAt  time.Time    `json:"updated_at"`

	epoch string // the stored session's epoch, see sessionRecord
	// rec and version are the record the session was loaded from, for a
	// handler that updates it next.
	rec     *sessionRecord
	version int64
}

// SessionFork names the origin of a forked session: the session, and how
// many of its messages the fork started with.
type SessionFork struct {
	Session  string `json:"session"`
	Messages int    `json:"messages"`
}

// SessionInfo describes a session without its messages.
type SessionInfo struct {
	ID     string        `json:"id"`
	Title  string        `json:"title,omitempty"`
	Status SessionStatus `json:"status"`
	// Messages is the number of messages; Runs the number of runs that
	// ended.
	Messages   int          `json:"messages"`
	Runs       int          `json:"runs"`
	Usage      model.Usage  `json:"usage"`
	Cost       model.Cost   `json:"cost"`
	Budget     *Budget      `json:"budget,omitempty"`
	ForkedFrom *SessionFork `json:"forked_from,omitempty"`
	CreatedAt  time.Time    `json:"created_at,omitzero"`
	UpdatedAt  time.Time    `json:"updated_at"`
}

// Errors of the session API.
var (
	// ErrSessionExists: a session with the id is stored already.
	ErrSessionExists = errors.New("agent: the session exists already")
	// ErrSessionFormat: the data is not a session export this version of
	// Calf reads.
	ErrSessionFormat = errors.New("agent: not a session export this version reads")
	// ErrSessionBusy: a run of the session is in progress, so messages
	// cannot be added to it ([Runtime.AppendToSession]).
	ErrSessionBusy = errors.New("agent: a run of the session is in progress")
)

// sessionRecord is what [store.KindSession] holds: the session without its
// messages, and the ids of the parts that hold them, in order. A record
// of format 0 (the first) holds the messages itself. From format 2, the
// record lists only the last parts and runs: the first PartChunks*8
// parts and RunChunks*8 runs are listed in [KindSessionChunk] records,
// 8 to a record, so that the record, written twice per run, stays about
// the same size however long the session grows.
type sessionRecord struct {
	Format int    `json:"format,omitempty"`
	ID     string `json:"id"`
	Title  string `json:"title,omitempty"`
	// Epoch changes when the session is replaced (saved over, imported
	// over, deleted and created again): a run whose history is the
	// session's start (historyRef) checks it.
	Epoch      string          `json:"epoch,omitempty"`
	Parts      []string        `json:"parts,omitempty"`
	PartChunks int             `json:"part_chunks,omitempty"`
	Count      int             `json:"count,omitempty"`
	Messages   []model.Message `json:"messages,omitempty"`
	// Runs are the last runs that ended, the RunChunks*8 before them in
	// chunks.
	Runs         []string          `json:"runs,omitempty"`
	RunChunks    int               `json:"run_chunks,omitempty"`
	Active       []string          `json:"active,omitempty"`
	Compacted    *CompactedContext `json:"compacted,omitempty"`
	AllowedTools []string          `json:"allowed_tools,omitempty"`
	Usage        model.Usage       `json:"usage"`
	Cost         model.Cost        `json:"cost"`
	Budget       *Budget           `json:"budget,omitempty"`
	ForkedFrom   *SessionFork      `json:"forked_from,omitempty"`
	CreatedAt    time.Time         `json:"created_at,omitzero"`
	UpdatedAt    time.Time         `json:"updated_at"`

	// raw is the record as stored, when it was read or written here.
	raw []byte
}

// sessionFormat is the format of the session records this version writes.
const sessionFormat = 2

// sessionChunk is the length of a list in a [KindSessionChunk] record. A
// record lists up to twice as many parts and runs: at that length, the
// first sessionChunk go to a chunk.
const sessionChunk = 8

// sessionChunkList is what a [KindSessionChunk] record holds.
type sessionChunkList struct {
	IDs []string `json:"ids"`
}

// chunkKey is the id of a chunk of the parts (what 'p') or the runs ('r')
// of the session r.
func chunkKey(r *sessionRecord, what byte, n int) string {
	return partKey(r.ID, fmt.Sprintf("%s/%c%08d", r.Epoch, what, n))
}

// rollSession moves the first parts and runs of r, a session record about
// to be written, to chunks while r lists too many. A chunk's content is
// the same whoever writes it: the lists only grow at their end.
func (rt *Runtime) rollSession(ctx context.Context, r *sessionRecord) error {
	roll := func(list *[]string, chunks *int, what byte) error {
		for len(*list) >= 2*sessionChunk {
			if err := rt.putChunk(ctx, KindSessionChunk, chunkKey(r, what, *chunks), sessionChunkList{IDs: (*list)[:sessionChunk]}); err != nil {
				return err
			}
			*list = slices.Clone((*list)[sessionChunk:])
			*chunks++
		}
		return nil
	}
	if err := roll(&r.Parts, &r.PartChunks, 'p'); err != nil {
		return err
	}
	return roll(&r.Runs, &r.RunChunks, 'r')
}

// chunked returns the ids listed in the n chunks of r's parts or runs
// (what), then those of list.
func (rt *Runtime) chunked(ctx context.Context, r *sessionRecord, what byte, n int, list []string) ([]string, error) {
	if n == 0 {
		return list, nil
	}
	ids, err := readChunks(ctx, rt.store, KindSessionChunk, "session "+r.ID, n, sessionChunk,
		func(i int) string { return chunkKey(r, what, i) },
		func(data []byte) ([]string, error) {
			var c sessionChunkList
			err := json.Unmarshal(data, &c)
			return c.IDs, err
		})
	if err != nil {
		return nil, err
	}
	return append(ids, list...), nil
}

// newEpoch returns a new session epoch.
func newEpoch() string { return calf.NewID()[:12] }

type sessionPart struct {
	Messages []model.Message `json:"messages"`
}

func decodeSessionRecord(id string, data []byte) (*sessionRecord, error) {
	var r sessionRecord
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("%w: session %s: %v", ErrCorruptState, id, err)
	}
	if r.ID == "" || r.Format > sessionFormat || r.Count < 0 || r.PartChunks < 0 || r.RunChunks < 0 {
		return nil, fmt.Errorf("%w: session %s: id %q, format %d, %d messages", ErrCorruptState, id, r.ID, r.Format, r.Count)
	}
	if r.Format == 0 {
		r.Count = len(r.Messages)
	}
	return &r, nil
}

func (r *sessionRecord) info() SessionInfo {
	status := SessionIdle
	if len(r.Active) > 0 {
		status = SessionRunning
	}
	return SessionInfo{ID: r.ID, Title: r.Title, Status: status, Messages: r.Count, Runs: r.RunChunks*sessionChunk + len(r.Runs), Usage: r.Usage, Cost: r.Cost, Budget: r.Budget,
		ForkedFrom: r.ForkedFrom, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
}

// partKey is the id of a part of a session's messages: the session id's
// length keeps the parts of session "a" apart from those of "a/b".
func partKey(session, part string) string {
	return strconv.Itoa(len(session)) + ":" + session + "/" + part
}

// indexKey is the id of a session's entry in the index.
func indexKey(id string, created time.Time) string {
	return fmt.Sprintf("%016x/%s", uint64(math.MaxInt64-created.UnixNano()), id)
}

// DecodeSession decodes a session serialized as JSON (the JSON of a
// [Session]). See [Runtime.ExportSession] for a versioned form.
func DecodeSession(data []byte) (*Session, error) {
	var s Session
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("%w: session: %v", ErrCorruptState, err)
	}
	if s.ID == "" {
		return nil, fmt.Errorf("%w: session: missing id", ErrCorruptState)
	}
	return &s, nil
}

// LoadSession returns a stored session with its messages, or an error
// matching [store.ErrNotFound].
func (rt *Runtime) LoadSession(ctx context.Context, id string) (*Session, error) {
	s, err := rt.loadSession(ctx, id, true)
	if err != nil {
		return nil, err
	}
	s.Messages = model.CloneMessages(s.Messages) // the caller's to change
	s.rec = nil
	return s, nil
}

// loadSession is LoadSession, which lists the session's runs only if
// runs is set.
func (rt *Runtime) loadSession(ctx context.Context, id string, runs bool) (*Session, error) {
	r, version, err := rt.sessionRecord(ctx, id)
	if err != nil {
		return nil, err
	}
	msgs, err := rt.sessionMessages(ctx, r)
	if err != nil {
		return nil, err
	}
	s := &Session{ID: r.ID, Title: r.Title, Messages: msgs, Runs: r.Runs, Active: r.Active, Compacted: r.Compacted,
		AllowedTools: r.AllowedTools, Usage: r.Usage, Cost: r.Cost, Budget: r.Budget, ForkedFrom: r.ForkedFrom, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
		epoch: r.Epoch, rec: r, version: version}
	if runs {
		if s.Runs, err = rt.chunked(ctx, r, 'r', r.RunChunks, r.Runs); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// SessionInfo describes a stored session without reading its messages, or
// returns an error matching [store.ErrNotFound].
func (rt *Runtime) SessionInfo(ctx context.Context, id string) (*SessionInfo, error) {
	r, _, err := rt.sessionRecord(ctx, id)
	if err != nil {
		return nil, err
	}
	info, err := rt.sessionInfo(ctx, r)
	if err != nil {
		return nil, err
	}
	return &info, nil
}

// sessionInfo is r.info() with the status of a session whose runs in
// progress may be paused, which takes a read of each.
func (rt *Runtime) sessionInfo(ctx context.Context, r *sessionRecord) (SessionInfo, error) {
	info := r.info()
	if len(r.Active) == 0 {
		return info, nil
	}
	for _, run := range r.Active {
		st, err := rt.loadRun(ctx, run)
		if err == nil && st.Status.Terminal() {
			continue // ended: its end is being applied
		}
		if errors.Is(err, store.ErrNotFound) || (err == nil && !st.Paused()) {
			return info, nil // starting, or running
		}
		if err != nil {
			return info, fmt.Errorf("agent: session %s: %w", r.ID, err)
		}
	}
	info.Status = SessionPaused
	return info, nil
}

func (rt *Runtime) sessionRecord(ctx context.Context, id string) (*sessionRecord, int64, error) {
	rec, err := rt.store.Get(ctx, store.KindSession, id)
	if err != nil {
		return nil, 0, fmt.Errorf("agent: load session %s: %w", id, err)
	}
	r, err := decodeSessionRecord(id, rec.Data)
	if err != nil {
		return nil, rec.Version, err
	}
	r.raw = rec.Data
	return r, rec.Version, nil
}

// sessionMessages reads the messages of the session r, in order: from the
// cache when r is the record they were cached at (see sessionCache).
func (rt *Runtime) sessionMessages(ctx context.Context, r *sessionRecord) ([]model.Message, error) {
	if r.Format == 0 || len(r.Parts)+r.PartChunks == 0 {
		return r.Messages, nil
	}
	if r.raw != nil {
		if msgs, ok := rt.sessions.messages(r.ID, r.raw); ok {
			return msgs, nil
		}
	}
	ids, err := rt.chunked(ctx, r, 'p', r.PartChunks, r.Parts)
	if err != nil {
		return nil, err
	}
	prefix := partKey(r.ID, "")
	type part struct {
		msgs []model.Message
		size int // as stored
	}
	parts := make(map[string]part, len(ids))
	for after := ""; ; {
		recs, err := rt.store.List(ctx, KindSessionMessages, prefix, after, recoverPage)
		if err != nil {
			return nil, fmt.Errorf("agent: load session %s: %w", r.ID, err)
		}
		for _, rec := range recs {
			var p sessionPart
			if err := json.Unmarshal(rec.Data, &p); err != nil {
				return nil, fmt.Errorf("%w: session %s: part %s: %v", ErrCorruptState, r.ID, rec.ID, err)
			}
			parts[strings.TrimPrefix(rec.ID, prefix)] = part{p.Messages, len(rec.Data)}
		}
		if len(recs) < recoverPage {
			break
		}
		after = recs[len(recs)-1].ID
	}
	msgs := make([]model.Message, 0, r.Count)
	size := 0
	for _, id := range ids {
		p, ok := parts[id]
		if !ok {
			return nil, fmt.Errorf("%w: session %s: part %s is missing", ErrCorruptState, r.ID, id)
		}
		msgs = append(msgs, p.msgs...)
		size += p.size
	}
	if r.raw != nil {
		rt.sessions.set(r.ID, r.raw, msgs, size)
	}
	return slices.Clip(msgs), nil
}

// putPart writes a part of a session's messages, replacing any earlier
// write of it (a part's content is the same on every attempt), and
// returns its size as stored. A part is new but on a redelivery: it is
// created without reading it first.
func (rt *Runtime) putPart(ctx context.Context, session, part string, msgs []model.Message) (int, error) {
	data, err := json.Marshal(sessionPart{Messages: msgs})
	if err != nil {
		return 0, err
	}
	key := partKey(session, part)
	_, err = rt.store.Put(ctx, KindSessionMessages, key, data, 0)
	if errors.Is(err, store.ErrConflict) {
		_, err = store.Update(ctx, rt.store, KindSessionMessages, key, func([]byte, bool) ([]byte, error) { return data, nil })
	}
	return len(data), err
}

// createSession stores the record r of a new session: its index entry
// first, so that a session is never stored without one (an entry without
// a session is skipped by the list, and removed with the session's id).
// It returns [ErrSessionExists] when the id is taken.
func (rt *Runtime) createSession(ctx context.Context, r *sessionRecord) error {
	if r.Epoch == "" {
		r.Epoch = newEpoch()
	}
	if err := rt.rollSession(ctx, r); err != nil {
		return err
	}
	if _, err := rt.store.Put(ctx, KindSessionIndex, indexKey(r.ID, r.CreatedAt), []byte("{}"), 0); err != nil && !errors.Is(err, store.ErrConflict) {
		return err
	}
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if _, err := rt.store.Put(ctx, store.KindSession, r.ID, data, 0); errors.Is(err, store.ErrConflict) {
		return fmt.Errorf("%w: %s", ErrSessionExists, r.ID)
	} else if err != nil {
		return err
	}
	r.raw = data
	return nil
}

// updateSession applies fn to the record of the session id, creating it
// (with the title title) when it does not exist and create is set.
func (rt *Runtime) updateSession(ctx context.Context, id string, create bool, title string, fn func(r *sessionRecord) (changed bool, err error)) error {
	return rt.changeSession(ctx, id, create, title, sessionChange{}, fn)
}

// sessionChange is what a caller of changeSession knows of the change.
type sessionChange struct {
	// known, when set, is the record the caller has just read, at
	// version: the first attempt starts from it instead of reading the
	// record again.
	known   *sessionRecord
	version int64
	// added are the messages fn may add to the session, of size bytes as
	// stored: the session cache then keeps the session's messages with
	// them.
	added []model.Message
	size  int
}

// changeSession is updateSession for a change c describes.
func (rt *Runtime) changeSession(ctx context.Context, id string, create bool, title string, c sessionChange, fn func(r *sessionRecord) (changed bool, err error)) error {
	known, version := c.known, c.version
	for {
		var r *sessionRecord
		var err error
		if known != nil {
			r, known = known, nil
		} else {
			r, version, err = rt.sessionRecord(ctx, id)
		}
		if errors.Is(err, store.ErrNotFound) {
			if !create {
				return nil
			}
			now := rt.now()
			r = &sessionRecord{Format: sessionFormat, ID: id, Title: title, CreatedAt: now, UpdatedAt: now}
			if _, err := fn(r); err != nil {
				return err
			}
			err := rt.createSession(ctx, r)
			if errors.Is(err, ErrSessionExists) {
				continue // created meanwhile: update it
			}
			if err == nil && r.Count == len(c.added) {
				rt.sessions.set(id, r.raw, c.added, c.size)
			}
			return err
		}
		if err != nil {
			return err
		}
		old, count := r.raw, r.Count
		changed, err := fn(r)
		if err != nil || !changed {
			return err
		}
		if r.Format == 0 {
			// A session of the first format: its messages become a part.
			if len(r.Messages) > 0 {
				if _, err := rt.putPart(ctx, id, "legacy", r.Messages); err != nil {
					return err
				}
				r.Parts = append([]string{"legacy"}, r.Parts...)
			}
			r.Messages = nil
		}
		r.Format = sessionFormat
		if err := rt.rollSession(ctx, r); err != nil {
			return err
		}
		r.UpdatedAt = rt.now()
		data, err := json.Marshal(r)
		if err != nil {
			return err
		}
		if _, err := rt.store.Put(ctx, store.KindSession, id, data, version); errors.Is(err, store.ErrConflict) {
			continue
		} else if err != nil {
			return err
		}
		switch r.Count {
		case count:
			rt.sessions.moved(id, old, data, nil, 0)
		case count + len(c.added):
			rt.sessions.moved(id, old, data, c.added, c.size)
		default:
			rt.sessions.forget(id)
		}
		return nil
	}
}

// startSessionRun records that the run st, in a session, started: the
// session is created if it is new, with the start of the prompt as title.
// s, when set, is the session as the caller has just loaded it.
func (rt *Runtime) startSessionRun(ctx context.Context, st *runState, prompt string, s *Session) error {
	var known *sessionRecord
	var version int64
	if s != nil && s.rec != nil && s.rec.ID == st.SessionID {
		known, version = s.rec, s.version
	}
	return rt.changeSession(ctx, st.SessionID, true, titleFrom(prompt), sessionChange{known: known, version: version}, func(r *sessionRecord) (bool, error) {
		if slices.Contains(r.Active, st.RunID) || slices.Contains(r.Runs, st.RunID) {
			return false, nil
		}
		r.Active = append(r.Active, st.RunID)
		return true, nil
	})
}

// endSessionRun records that the run st, in a session, ended: a run that
// completed (or handed off) adds its messages and its compaction, once;
// every run adds its usage and leaves the session's active runs.
func (rt *Runtime) endSessionRun(ctx context.Context, st *runState) error {
	if st.SessionID == "" {
		return nil
	}
	adds := st.Status == RunComplete || st.Status == RunHandedOff
	if adds && st.bare && st.Archived > 0 {
		if err := rt.readBack(ctx, st); err != nil { // NewMessages needs the archived ones
			return err
		}
	}
	msgs := st.NewMessages()
	var added []model.Message
	var size int
	if adds && len(msgs) > 0 {
		var err error
		if size, err = rt.putPart(ctx, st.SessionID, st.RunID, msgs); err != nil {
			return err
		}
		added = msgs
	}
	return rt.changeSession(ctx, st.SessionID, adds, titleFrom(firstUserText(msgs)), sessionChange{added: added, size: size}, func(r *sessionRecord) (bool, error) {
		// A run that started in the session is active until its end is
		// applied. One that did not (its prompt refused, or cancelled
		// before it started) spent nothing and adds nothing: it is only
		// listed, unless it is among the last runs listed already.
		spent := st.Usage != (model.Usage{}) || st.Cost.USD != 0 || len(st.Cost.Unpriced) > 0
		if !slices.Contains(r.Active, st.RunID) && (adds || spent || slices.Contains(r.Runs, st.RunID)) {
			return false, nil // ended before: this is a redelivery
		}
		r.Active = slices.DeleteFunc(r.Active, func(id string) bool { return id == st.RunID })
		r.Usage, r.Cost = r.Usage.Add(st.Usage), r.Cost.Add(st.Cost)
		r.Runs = append(r.Runs, st.RunID)
		if !adds {
			return true, nil
		}
		// The run's compaction stands for the session's first messages when
		// they are those the run started from, as they are unless another
		// run of the session ended in between, and it covers the run's
		// history only.
		if c := st.Compacted; c != nil && (c.Upto <= st.HistoryLen || r.Count == st.HistoryLen) &&
			(r.Compacted == nil || r.Compacted.Upto < c.Upto) {
			r.Compacted = c
		}
		if len(msgs) > 0 {
			r.Parts = append(r.Parts, st.RunID)
			r.Count += len(msgs)
		}
		return true, nil
	})
}

// titleFrom derives a session's title from a prompt: its first line, up to
// 80 characters.
func titleFrom(prompt string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(prompt), "\n")
	line = strings.TrimSpace(line)
	if utf8.RuneCountInString(line) <= 80 {
		return line
	}
	r := []rune(line)
	return strings.TrimSpace(string(r[:79])) + "…"
}

func firstUserText(msgs []model.Message) string {
	for _, m := range msgs {
		if m.Role == model.RoleUser {
			return m.Text()
		}
	}
	return ""
}

// AppendToSession adds msgs to the end of the stored session id without a
// run, so that the session's next run sees them, as it sees the messages
// of the runs before it. The messages must make a conversation on their
// own (see [Runtime.ImportSession]: a tool result answers a call of an
// assistant message among them, every call is answered). They are stored
// as a part of the session's messages and listed in the session's record
// with a compare-and-swap, so that appends and runs that end at the same
// time all keep theirs. It refuses an unknown session (an error matching
// [store.ErrNotFound]: create one with [Runtime.SaveSession] or a run),
// and a session with a run in progress with [ErrSessionBusy], since the
// run did not start from the messages and adds its own after them; a run
// that starts while the append is made may not see them.
func (rt *Runtime) AppendToSession(ctx context.Context, id string, msgs ...model.Message) error {
	if len(msgs) == 0 {
		return fmt.Errorf("agent: append to session %s: no messages", id)
	}
	if err := checkConversation(msgs); err != nil {
		return fmt.Errorf("agent: append to session %s: %w", id, err)
	}
	r, version, err := rt.sessionRecord(ctx, id)
	if err != nil {
		return err
	}
	busy := func(r *sessionRecord) error {
		if len(r.Active) > 0 {
			return fmt.Errorf("%w: %s (run %s)", ErrSessionBusy, id, r.Active[0])
		}
		return nil
	}
	if err := busy(r); err != nil {
		return err
	}
	msgs = model.CloneMessages(msgs) // the caller's stay the caller's
	part := "append-" + calf.NewID()
	size, err := rt.putPart(ctx, id, part, msgs)
	if err != nil {
		return fmt.Errorf("agent: append to session %s: %w", id, err)
	}
	applied := false
	err = rt.changeSession(ctx, id, false, "", sessionChange{known: r, version: version, added: msgs, size: size}, func(r *sessionRecord) (bool, error) {
		if err := busy(r); err != nil {
			return false, err
		}
		r.Parts = append(r.Parts, part)
		r.Count += len(msgs)
		applied = true
		return true, nil
	})
	if err == nil && !applied {
		err = fmt.Errorf("agent: load session %s: %w", id, store.ErrNotFound) // deleted meanwhile
	}
	if err != nil {
		// The part is listed nowhere: remove it.
		if derr := rt.store.Delete(ctx, KindSessionMessages, partKey(id, part), 0); derr != nil && !errors.Is(derr, store.ErrNotFound) {
			rt.log.Warn("agent: remove the part of a refused append", "session", id, "err", derr)
		}
		return err
	}
	return nil
}

// SetSessionTitle sets the title of the stored session id.
func (rt *Runtime) SetSessionTitle(ctx context.Context, id, title string) error {
	if _, _, err := rt.sessionRecord(ctx, id); err != nil {
		return err
	}
	return rt.updateSession(ctx, id, false, "", func(r *sessionRecord) (bool, error) {
		r.Title = title
		return true, nil
	})
}

// SaveSession writes a session, replacing any stored one with its id: use
// it to restore a serialized conversation or to seed one. Its CreatedAt is
// kept when set.
func (rt *Runtime) SaveSession(ctx context.Context, s *Session) error {
	if s.ID == "" {
		return errors.New("agent: save session: empty id")
	}
	return rt.writeSession(ctx, s, "saved-"+calf.NewID()[:8], true)
}

// writeSession stores s whole, its messages as one part named part, over
// the stored session with its id when replace is set.
func (rt *Runtime) writeSession(ctx context.Context, s *Session, part string, replace bool) error {
	if err := store.CheckKey(store.KindSession, s.ID); err != nil {
		return err
	}
	defer rt.sessions.forget(s.ID)
	old, _, err := rt.sessionRecord(ctx, s.ID)
	switch {
	case err == nil && !replace:
		return fmt.Errorf("%w: %s", ErrSessionExists, s.ID)
	case err != nil && !errors.Is(err, store.ErrNotFound):
		return err
	}
	if len(s.Messages) > 0 {
		if _, err := rt.putPart(ctx, s.ID, part, s.Messages); err != nil {
			return err
		}
	}
	now := rt.now()
	r := &sessionRecord{Format: sessionFormat, ID: s.ID, Title: s.Title, Epoch: newEpoch(), Count: len(s.Messages), Runs: slices.Clone(s.Runs),
		Compacted: s.Compacted, AllowedTools: s.AllowedTools, Usage: s.Usage, Cost: s.Cost, Budget: s.Budget, ForkedFrom: s.ForkedFrom,
		CreatedAt: s.CreatedAt, UpdatedAt: now}
	if r.CreatedAt.IsZero() {
		r.CreatedAt = now
	}
	if len(s.Messages) > 0 {
		r.Parts = []string{part}
	}
	if old == nil {
		return rt.createSession(ctx, r)
	}
	if !old.CreatedAt.Equal(r.CreatedAt) {
		if _, err := rt.store.Put(ctx, KindSessionIndex, indexKey(r.ID, r.CreatedAt), []byte("{}"), 0); err != nil && !errors.Is(err, store.ErrConflict) {
			return err
		}
	}
	if err := rt.rollSession(ctx, r); err != nil {
		return err
	}
	oldParts, err := rt.chunked(ctx, old, 'p', old.PartChunks, old.Parts)
	if err != nil {
		rt.log.Warn("agent: a replaced session's messages are not all known", "session", s.ID, "err", err)
	}
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if _, err := store.Update(ctx, rt.store, store.KindSession, s.ID, func([]byte, bool) ([]byte, error) { return data, nil }); err != nil {
		return err
	}
	// The replaced session's parts, chunks and index entry go.
	if !old.CreatedAt.Equal(r.CreatedAt) {
		_ = rt.store.Delete(ctx, KindSessionIndex, indexKey(old.ID, old.CreatedAt), 0)
	}
	for _, p := range oldParts {
		if p != part {
			if err := rt.store.Delete(ctx, KindSessionMessages, partKey(s.ID, p), 0); err != nil {
				rt.log.Warn("agent: a replaced session's messages were not deleted", "session", s.ID, "part", p, "err", err)
			}
		}
	}
	if err := rt.deleteChunks(ctx, old); err != nil {
		rt.log.Warn("agent: a replaced session's chunks were not deleted", "session", s.ID, "err", err)
	}
	return nil
}

// deleteChunks removes the chunks of the session record r.
func (rt *Runtime) deleteChunks(ctx context.Context, r *sessionRecord) error {
	for what, n := range map[byte]int{'p': r.PartChunks, 'r': r.RunChunks} {
		for i := range n {
			if err := rt.store.Delete(ctx, KindSessionChunk, chunkKey(r, what, i), 0); err != nil {
				return err
			}
		}
	}
	return nil
}

// DeleteSession removes a stored session, its messages and its index
// entry. Deleting a missing session is not an error.
func (rt *Runtime) DeleteSession(ctx context.Context, id string) error {
	defer rt.sessions.forget(id)
	r, version, err := rt.sessionRecord(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil && !errors.Is(err, ErrCorruptState) {
		return err
	}
	if err := rt.store.Delete(ctx, store.KindSession, id, version); err != nil {
		return fmt.Errorf("agent: delete session %s: %w", id, err)
	}
	if err := rt.deleteAgentStates(ctx, id); err != nil {
		return fmt.Errorf("agent: delete session %s: %w", id, err)
	}
	if r == nil {
		return nil // corrupt: its parts are not known
	}
	parts, err := rt.chunked(ctx, r, 'p', r.PartChunks, r.Parts)
	if err != nil {
		return fmt.Errorf("agent: delete session %s: %w", id, err)
	}
	for _, p := range parts {
		if err := rt.store.Delete(ctx, KindSessionMessages, partKey(id, p), 0); err != nil {
			return fmt.Errorf("agent: delete session %s: %w", id, err)
		}
	}
	if err := rt.deleteChunks(ctx, r); err != nil {
		return fmt.Errorf("agent: delete session %s: %w", id, err)
	}
	return rt.store.Delete(ctx, KindSessionIndex, indexKey(id, r.CreatedAt), 0)
}

// SessionListOptions page through [Runtime.Sessions].
type SessionListOptions struct {
	// Limit is the most sessions a page holds: default 50, at most 1,000.
	Limit int
	// After is the Next of the previous page: empty for the first.
	After string
}

// SessionPage is a page of [Runtime.Sessions].
type SessionPage struct {
	Sessions []SessionInfo `json:"sessions"`
	// Next, when not empty, is the After of the next page.
	Next string `json:"next,omitempty"`
}

// Sessions lists the stored sessions, newest (by creation) first, a page
// at a time.
func (rt *Runtime) Sessions(ctx context.Context, opts *SessionListOptions) (*SessionPage, error) {
	var o SessionListOptions
	if opts != nil {
		o = *opts
	}
	switch {
	case o.Limit < 0 || o.Limit > 1000:
		return nil, fmt.Errorf("agent: list sessions: limit %d: give 1 to 1,000, or 0 for the default", o.Limit)
	case o.Limit == 0:
		o.Limit = 50
	}
	page := &SessionPage{Sessions: []SessionInfo{}}
	after := o.After
	for len(page.Sessions) < o.Limit {
		want := o.Limit - len(page.Sessions)
		recs, err := rt.store.List(ctx, KindSessionIndex, "", after, want)
		if err != nil {
			return nil, fmt.Errorf("agent: list sessions: %w", err)
		}
		for _, rec := range recs {
			after = rec.ID
			_, id, ok := strings.Cut(rec.ID, "/")
			if !ok {
				continue
			}
			r, _, err := rt.sessionRecord(ctx, id)
			if errors.Is(err, store.ErrNotFound) {
				continue // being created, or deleted
			}
			if err != nil {
				return nil, err
			}
			if indexKey(id, r.CreatedAt) != rec.ID {
				continue // an entry the session outlived
			}
			info, err := rt.sessionInfo(ctx, r)
			if err != nil {
				return nil, err
			}
			page.Sessions = append(page.Sessions, info)
		}
		if len(recs) < want {
			return page, nil
		}
	}
	more, err := rt.store.List(ctx, KindSessionIndex, "", after, 1)
	if err != nil {
		return nil, fmt.Errorf("agent: list sessions: %w", err)
	}
	if len(more) > 0 {
		page.Next = after
	}
	return page, nil
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

// ForkSession copies the first messages of the session id into a new
// session, independent of it: runs in either do not change the other. The
// fork keeps the session's allowed tools, and its compaction when it
// covers the fork's messages only. A fork from the end also copies the
// session's custom agents' state ([Custom.State]); a fork from an earlier
// message starts them from the zero state.
func (rt *Runtime) ForkSession(ctx context.Context, id string, opts *ForkOptions) (*Session, error) {
	var o ForkOptions
	if opts != nil {
		o = *opts
	}
	src, err := rt.LoadSession(ctx, id)
	if err != nil {
		return nil, err
	}
	at := o.At
	switch {
	case at < 0 || at > len(src.Messages):
		return nil, fmt.Errorf("agent: fork session %s at message %d: it has %d", id, at, len(src.Messages))
	case at == 0:
		at = len(src.Messages)
	}
	fork := &Session{
		ID: o.ID, Title: o.Title, Messages: slices.Clone(src.Messages[:at]),
		AllowedTools: slices.Clone(src.AllowedTools), ForkedFrom: &SessionFork{Session: id, Messages: at},
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
	if err := rt.writeSession(ctx, fork, "fork", false); err != nil {
		return nil, fmt.Errorf("agent: fork session %s: %w", id, err)
	}
	if at == len(src.Messages) {
		if err := rt.copyAgentStates(ctx, id, fork.ID); err != nil {
			return nil, fmt.Errorf("agent: fork session %s: %w", id, err)
		}
	}
	return rt.LoadSession(ctx, fork.ID)
}

// SessionExportFormat names the format of [Runtime.ExportSession]'s JSON.
const SessionExportFormat = "calf.session/v1"

// sessionExport is the JSON of an exported session.
type sessionExport struct {
	Format string `json:"format"`
	*Session
}

// ExportSession returns the stored session id as versioned JSON
// ({"format": "calf.session/v1", "id": ..., "messages": [...], ...}),
// which [Runtime.ImportSession] reads back, in this process or another.
func (rt *Runtime) ExportSession(ctx context.Context, id string) ([]byte, error) {
	s, err := rt.LoadSession(ctx, id)
	if err != nil {
		return nil, err
	}
	s.Active = nil // runs of this store, not of the export
	return json.MarshalIndent(sessionExport{Format: SessionExportFormat, Session: s}, "", "  ")
}

// ImportOptions say how to import a session.
type ImportOptions struct {
	// ID, when set, is the imported session's id instead of the export's.
	ID string
	// Replace lets the import replace a stored session with the same id.
	Replace bool
}

// ImportSession stores a session exported by [Runtime.ExportSession]. It
// refuses data that is not such an export, of a newer format than this
// version reads, or whose messages do not make a conversation (a tool
// result that answers no call of the assistant message before it, or
// answers one again; calls left unanswered when the next turn starts or
// the conversation ends), with an error matching [ErrSessionFormat] that
// names the first wrong message; and a session whose id is taken, unless
// opts.Replace, with [ErrSessionExists].
func (rt *Runtime) ImportSession(ctx context.Context, data []byte, opts *ImportOptions) (*Session, error) {
	var o ImportOptions
	if opts != nil {
		o = *opts
	}
	s, err := decodeExport(data)
	if err != nil {
		return nil, err
	}
	if o.ID != "" {
		s.ID = o.ID
	}
	s.Active = nil
	if err := rt.writeSession(ctx, s, "import-"+calf.NewID()[:8], o.Replace); err != nil {
		return nil, fmt.Errorf("agent: import session %s: %w", s.ID, err)
	}
	return rt.LoadSession(ctx, s.ID)
}

// decodeExport decodes and checks an exported session.
func decodeExport(data []byte) (*Session, error) {
	var head struct {
		Format *string `json:"format"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSessionFormat, err)
	}
	if head.Format == nil {
		return nil, fmt.Errorf("%w: no format: not an export of a session", ErrSessionFormat)
	}
	name, v, ok := strings.Cut(*head.Format, "/v")
	n, err := strconv.Atoi(v)
	if !ok || name != "calf.session" || err != nil || n < 1 {
		return nil, fmt.Errorf("%w: format %q is not a session export", ErrSessionFormat, *head.Format)
	}
	if n > 1 {
		return nil, fmt.Errorf("%w: format %q is newer than this version of Calf reads (%s)", ErrSessionFormat, *head.Format, SessionExportFormat)
	}
	var s Session
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	exp := sessionExport{Session: &s}
	if err := dec.Decode(&exp); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSessionFormat, err)
	}
	if s.ID == "" {
		return nil, fmt.Errorf("%w: the session has no id", ErrSessionFormat)
	}
	if err := store.CheckKey(store.KindSession, s.ID); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSessionFormat, err)
	}
	if err := checkConversation(s.Messages); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSessionFormat, err)
	}
	if c := s.Compacted; c != nil && (c.Upto < 0 || c.Upto > len(s.Messages)) {
		return nil, fmt.Errorf("%w: the compaction stands for %d messages of %d", ErrSessionFormat, c.Upto, len(s.Messages))
	}
	return &s, nil
}

// checkConversation reports the first message of msgs that does not make
// a conversation a model can be given: a role it does not know, a tool
// result that answers no call of the assistant message before it (or one
// answered already), an assistant message whose calls lack ids or share
// one, or calls left unanswered when the next turn starts or the
// conversation ends. Messages are numbered from 0.
func checkConversation(msgs []model.Message) error {
	var (
		turn    = -1            // the assistant message whose calls are being answered
		pending map[string]bool // its calls not answered yet, by id
		done    map[string]bool // its calls answered
	)
	unanswered := func() error {
		if len(pending) == 0 {
			return nil
		}
		ids := slices.Sorted(maps.Keys(pending))
		return fmt.Errorf("message %d (assistant) makes tool calls that no tool result answers: %s", turn, strings.Join(ids, ", "))
	}
	for i, m := range msgs {
		if len(m.ToolCalls) > 0 && m.Role != model.RoleAssistant {
			return fmt.Errorf("message %d (%s) makes tool calls: only assistant messages do", i, m.Role)
		}
		switch m.Role {
		case model.RoleTool:
			switch {
			case m.ToolCallID == "":
				return fmt.Errorf("message %d is a tool result without its call's id", i)
			case turn < 0:
				return fmt.Errorf("message %d is a tool result (call %q) that follows no assistant message with tool calls", i, m.ToolCallID)
			case done[m.ToolCallID]:
				return fmt.Errorf("message %d answers call %q of message %d again", i, m.ToolCallID, turn)
			}
			if !pending[m.ToolCallID] {
				return fmt.Errorf("message %d is a tool result for call %q, which message %d (assistant) does not make", i, m.ToolCallID, turn)
			}
			delete(pending, m.ToolCallID)
			done[m.ToolCallID] = true
		case model.RoleUser, model.RoleAssistant, model.RoleSystem:
			if err := unanswered(); err != nil {
				return err
			}
			turn, pending, done = -1, nil, nil
			if m.Role != model.RoleAssistant || len(m.ToolCalls) == 0 {
				continue
			}
			turn, pending, done = i, make(map[string]bool, len(m.ToolCalls)), make(map[string]bool, len(m.ToolCalls))
			for _, c := range m.ToolCalls {
				if c.ID == "" {
					return fmt.Errorf("message %d (assistant) calls %q without a call id", i, c.Name)
				}
				if pending[c.ID] {
					return fmt.Errorf("message %d (assistant) makes two calls with the id %q", i, c.ID)
				}
				pending[c.ID] = true
			}
		default:
			return fmt.Errorf("message %d has the role %q", i, m.Role)
		}
	}
	return unanswered()
}

// SetSessionBudget sets the budget of the session id (nil: none), which
// bounds what its runs spend together, counted from what the session had
// spent when each run started; the session is created if it does not
// exist. The runs of the session in progress take the new budget, and
// those it paused go on at once if it lets them; those it still stops
// stay paused, with no event (see [Runtime.SetBudget]).
func (rt *Runtime) SetSessionBudget(ctx context.Context, id string, b *Budget) error {
	if b != nil {
		if err := b.validate(); err != nil {
			return fmt.Errorf("agent: set the budget of session %s: %w", id, err)
		}
	}
	var active []string
	err := rt.updateSession(ctx, id, true, "", func(r *sessionRecord) (bool, error) {
		r.Budget, active = b, slices.Clone(r.Active)
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("agent: set the budget of session %s: %w", id, err)
	}
	for _, run := range active {
		st, err := rt.loadRun(ctx, run)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		var resumed bool
		st, err = rt.updateChain(ctx, st.Agent, run, nil, func(st *runState) (bool, error) {
			st.SessionBudget = b
			if b != nil && st.SessionSpent == nil {
				st.SessionSpent = &Spent{}
			}
			resumed = st.Paused() && st.Pause.Budget != nil && st.Pause.Budget.Scope == "session"
			if resumed && st.Pause.Budget.stops(b, st) && !b.Fail {
				st.keepPaused(b) // no event: it still waits for a budget that lets it go on
				resumed = false
			}
			if resumed {
				st.Pause = nil
				st.Resumes++
			}
			return true, nil
		})
		if errors.Is(err, ErrRunEnded) {
			continue
		}
		if err != nil {
			return fmt.Errorf("agent: set the budget of session %s: run %s: %w", id, run, err)
		}
		if resumed {
			if err := rt.emitResume(ctx, st); err != nil {
				return fmt.Errorf("agent: set the budget of session %s: run %s: %w", id, run, err)
			}
		}
	}
	return nil
}
