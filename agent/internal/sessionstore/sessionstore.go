// Package sessionstore keeps sessions in a [store.Store]: the stored
// format of a session (its record, the parts of its messages, the chunks
// of its long lists, its entry in the index), and every operation on it.
// Package agent/session offers the operations to users; the agent engine
// uses the same ones, with those only a run needs (a run's start and end
// in its session) and a cache of the messages of recent sessions.
//
// The records' JSON is a stored format: records written by earlier
// versions must decode (agent's testdata/records, TestStoredRecords), so a
// field is added, never renamed or given another meaning.
package sessionstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/calf-go/calf/agent/compaction"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent/internal/records"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/store/adapter"
)

// Record kinds of sessions, besides [store.KindSession], which holds a
// session's description.
const (
	// KindMessages holds a part of a session's messages: the messages one
	// run added, or those a session was imported or forked with. Its id
	// is "{len(session id)}:{session id}/{part}".
	KindMessages = "session_messages"
	// KindIndex lists the sessions, newest first: one empty record per
	// session, with the id "{inverted creation time, 16 hex
	// digits}/{session id}".
	KindIndex = "session_index"
	// KindChunk holds a chunk of a long session's list of parts or of
	// runs, so that the session's own record stays small: its id is
	// "{len(session id)}:{session id}/{epoch}/{p or r}{chunk, 8 digits}".
	KindChunk = "session_chunk"
	// KindAgentState holds a custom agent's state: one record per agent
	// and session (id "{len(session id)}:{session id}/{agent}"), or run
	// outside a session. A session's go with it and are copied to its
	// forks.
	KindAgentState = "agent_state"
)

// Errors of the operations.
var (
	// ErrExists: a session with the id is stored already.
	ErrExists = errors.New("session: the session exists already")
	// ErrBusy: a run of the session is in progress, so messages cannot
	// be added to it.
	ErrBusy = errors.New("session: a run of the session is in progress")
)

// Statuses of a session, as [Sessions.Status] says them.
const (
	StatusIdle    = "idle"
	StatusRunning = "running"
	StatusPaused  = "paused"
)

// Budget is a session's budget as stored: the fields of agent.Budget,
// which converts to it.
type Budget struct {
	MaxModelCalls int64   `json:"max_model_calls,omitempty"`
	MaxTokens     int64   `json:"max_tokens,omitempty"`
	MaxCostUSD    float64 `json:"max_cost_usd,omitempty"`
	Fail          bool    `json:"fail,omitempty"`
}

// Compacted is what the model sees of a conversation's first Upto
// messages in their place, as stored in a session and in a run.
type Compacted = compaction.Record

// Origin names the session a fork was made from, and how many of its
// messages the fork started with.
type Origin struct {
	Session  string `json:"session"`
	Messages int    `json:"messages"`
}

// Record is what [store.KindSession] holds: the session without its
// messages, and the ids of the parts that hold them, in order. A record
// of format 0 (the first) holds the messages itself. From format 2, the
// record lists only the last parts and runs: the first PartChunks*8
// parts and RunChunks*8 runs are listed in [KindChunk] records, 8 to a
// record, so that the record, written twice per run, stays about the same
// size however long the session grows.
type Record struct {
	Format int    `json:"format,omitempty"`
	ID     string `json:"id"`
	Title  string `json:"title,omitempty"`
	// Epoch changes when the session is replaced (saved over, imported
	// over, deleted and created again): a run whose history is the
	// session's start checks it.
	Epoch      string          `json:"epoch,omitempty"`
	Parts      []string        `json:"parts,omitempty"`
	PartChunks int             `json:"part_chunks,omitempty"`
	Count      int             `json:"count,omitempty"`
	Messages   []model.Message `json:"messages,omitempty"`
	// Runs are the last runs that ended, the RunChunks*8 before them in
	// chunks.
	Runs         []string    `json:"runs,omitempty"`
	RunChunks    int         `json:"run_chunks,omitempty"`
	Active       []string    `json:"active,omitempty"`
	Compacted    *Compacted  `json:"compacted,omitempty"`
	AllowedTools []string    `json:"allowed_tools,omitempty"`
	Usage        model.Usage `json:"usage"`
	Cost         model.Cost  `json:"cost"`
	Budget       *Budget     `json:"budget,omitempty"`
	ForkedFrom   *Origin     `json:"forked_from,omitempty"`
	CreatedAt    time.Time   `json:"created_at,omitzero"`
	UpdatedAt    time.Time   `json:"updated_at"`

	// raw is the record as stored, when it was read or written here.
	raw []byte
}

// format is the format of the session records this version writes.
const format = 2

// chunk is the length of a list in a [KindChunk] record. A record lists up
// to twice as many parts and runs: at that length, the first chunk go to a
// chunk.
const chunk = 8

// chunkList is what a [KindChunk] record holds.
type chunkList struct {
	IDs []string `json:"ids"`
}

type part struct {
	Messages []model.Message `json:"messages"`
}

// RunCount is the number of runs of r that ended.
func (r *Record) RunCount() int { return r.RunChunks*chunk + len(r.Runs) }

// Sessions are the sessions of a store.
type Sessions struct {
	store store.Store
	now   func() time.Time
	log   *slog.Logger
	cache *cache
}

// New returns the sessions of s, writing times read from now and warnings
// to log (nil: time.Now, none). With cached set, the messages of recent
// sessions are kept (see cache): for the engine, whose runs read their
// session's messages at every start.
func New(s store.Store, now func() time.Time, log *slog.Logger, cached bool) *Sessions {
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ss := &Sessions{store: s, now: now, log: log}
	if cached {
		ss.cache = newCache(cacheSessions, cacheBytes)
	}
	return ss
}

// chunkKey is the id of a chunk of the parts (what 'p') or the runs ('r')
// of the session r.
func chunkKey(r *Record, what byte, n int) string {
	return partKey(r.ID, fmt.Sprintf("%s/%c%08d", r.Epoch, what, n))
}

// roll moves the first parts and runs of r, a session record about to be
// written, to chunks while r lists too many. A chunk's content is the same
// whoever writes it: the lists only grow at their end.
func (ss *Sessions) roll(ctx context.Context, r *Record) error {
	roll := func(list *[]string, chunks *int, what byte) error {
		for len(*list) >= 2*chunk {
			if err := records.PutChunk(ctx, ss.store, KindChunk, chunkKey(r, what, *chunks), chunkList{IDs: (*list)[:chunk]}); err != nil {
				return err
			}
			*list = slices.Clone((*list)[chunk:])
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
func (ss *Sessions) chunked(ctx context.Context, r *Record, what byte, n int, list []string) ([]string, error) {
	if n == 0 {
		return list, nil
	}
	ids, err := records.ReadChunks(ctx, ss.store, KindChunk, "session "+r.ID, n, chunk,
		func(i int) string { return chunkKey(r, what, i) },
		func(data []byte) ([]string, error) {
			var c chunkList
			err := json.Unmarshal(data, &c)
			return c.IDs, err
		})
	if err != nil {
		return nil, err
	}
	return append(ids, list...), nil
}

// Runs returns the runs of r that ended, oldest first.
func (ss *Sessions) Runs(ctx context.Context, r *Record) ([]string, error) {
	return ss.chunked(ctx, r, 'r', r.RunChunks, r.Runs)
}

// newEpoch returns a new session epoch.
func newEpoch() string { return calf.NewID()[:12] }

// Decode decodes the record of session id.
func Decode(id string, data []byte) (*Record, error) {
	var r Record
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("%w: session %s: %v", records.ErrCorrupt, id, err)
	}
	if r.ID == "" || r.Format > format || r.Count < 0 || r.PartChunks < 0 || r.RunChunks < 0 {
		return nil, fmt.Errorf("%w: session %s: id %q, format %d, %d messages", records.ErrCorrupt, id, r.ID, r.Format, r.Count)
	}
	if r.Format == 0 {
		r.Count = len(r.Messages)
	}
	return &r, nil
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

// Get reads the record of session id, and its version, or returns an
// error matching [store.ErrNotFound].
func (ss *Sessions) Get(ctx context.Context, id string) (*Record, int64, error) {
	rec, err := ss.store.Get(ctx, store.KindSession, id)
	if err != nil {
		return nil, 0, fmt.Errorf("session: load %s: %w", id, err)
	}
	r, err := Decode(id, rec.Data)
	if err != nil {
		return nil, rec.Version, err
	}
	r.raw = rec.Data
	return r, rec.Version, nil
}

// runHead is what a session's status reads of the record of one of its
// runs (agent's runState): a run is paused when it is running, at the
// step its pause was asked for, before that step's model call (agent's
// runState.Paused; TestSessionStatusAgreesWithRun keeps the two alike).
type runHead struct {
	Status string `json:"status"`
	Phase  string `json:"phase"`
	Step   int    `json:"step"`
	Pause  *struct {
		Step int `json:"step"`
	} `json:"pause"`
}

// Status says what the session r is doing: [StatusRunning] when a run of
// it is in progress, [StatusPaused] when those in progress are all paused
// (which takes a read of each), [StatusIdle] otherwise.
func (ss *Sessions) Status(ctx context.Context, r *Record) (string, error) {
	if len(r.Active) == 0 {
		return StatusIdle, nil
	}
	for _, run := range r.Active {
		rec, err := ss.store.Get(ctx, store.KindRun, run)
		if errors.Is(err, store.ErrNotFound) {
			return StatusRunning, nil // starting
		}
		if err != nil {
			return StatusRunning, fmt.Errorf("session %s: load run %s: %w", r.ID, run, err)
		}
		var h runHead
		if err := json.Unmarshal(rec.Data, &h); err != nil {
			return StatusRunning, fmt.Errorf("%w: session %s: run %s: %v", records.ErrCorrupt, r.ID, run, err)
		}
		if h.Status != "running" {
			continue // ended: its end is being applied
		}
		if h.Pause == nil || h.Pause.Step != h.Step || h.Phase != "inference" {
			return StatusRunning, nil
		}
	}
	return StatusPaused, nil
}

// Messages reads the messages of the session r, in order: from the cache
// when r is the record they were cached at (see cache). The caller must
// not change them.
func (ss *Sessions) Messages(ctx context.Context, r *Record) ([]model.Message, error) {
	if r.Format == 0 || len(r.Parts)+r.PartChunks == 0 {
		return r.Messages, nil
	}
	if r.raw != nil {
		if msgs, ok := ss.cache.messages(r.ID, r.raw); ok {
			return msgs, nil
		}
	}
	ids, err := ss.chunked(ctx, r, 'p', r.PartChunks, r.Parts)
	if err != nil {
		return nil, err
	}
	prefix := partKey(r.ID, "")
	type stored struct {
		msgs []model.Message
		size int // as stored
	}
	parts := make(map[string]stored, len(ids))
	for after := ""; ; {
		recs, err := ss.store.List(ctx, KindMessages, prefix, after, records.Page)
		if err != nil {
			return nil, fmt.Errorf("session: load %s: %w", r.ID, err)
		}
		for _, rec := range recs {
			var p part
			if err := json.Unmarshal(rec.Data, &p); err != nil {
				return nil, fmt.Errorf("%w: session %s: part %s: %v", records.ErrCorrupt, r.ID, rec.ID, err)
			}
			parts[strings.TrimPrefix(rec.ID, prefix)] = stored{p.Messages, len(rec.Data)}
		}
		if len(recs) < records.Page {
			break
		}
		after = recs[len(recs)-1].ID
	}
	msgs := make([]model.Message, 0, r.Count)
	size := 0
	for _, id := range ids {
		p, ok := parts[id]
		if !ok {
			return nil, fmt.Errorf("%w: session %s: part %s is missing", records.ErrCorrupt, r.ID, id)
		}
		msgs = append(msgs, p.msgs...)
		size += p.size
	}
	if r.raw != nil {
		ss.cache.set(r.ID, r.raw, msgs, size)
	}
	return slices.Clip(msgs), nil
}

// putPart writes a part of a session's messages, replacing any earlier
// write of it (a part's content is the same on every attempt), and
// returns its size as stored. A part is new but on a redelivery: it is
// created without reading it first.
func (ss *Sessions) putPart(ctx context.Context, session, name string, msgs []model.Message) (int, error) {
	data, err := json.Marshal(part{Messages: msgs})
	if err != nil {
		return 0, err
	}
	key := partKey(session, name)
	_, err = ss.store.Put(ctx, KindMessages, key, data, 0)
	if errors.Is(err, store.ErrConflict) {
		_, err = store.Update(ctx, ss.store, KindMessages, key, func([]byte, bool) ([]byte, error) { return data, nil })
	}
	return len(data), err
}

// create stores the record r of a new session: its index entry first, so
// that a session is never stored without one (an entry without a session
// is skipped by the list, and removed with the session's id). It returns
// [ErrExists] when the id is taken.
func (ss *Sessions) create(ctx context.Context, r *Record) error {
	if r.Epoch == "" {
		r.Epoch = newEpoch()
	}
	if err := ss.roll(ctx, r); err != nil {
		return err
	}
	if _, err := ss.store.Put(ctx, KindIndex, indexKey(r.ID, r.CreatedAt), []byte("{}"), 0); err != nil && !errors.Is(err, store.ErrConflict) {
		return err
	}
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if _, err := ss.store.Put(ctx, store.KindSession, r.ID, data, 0); errors.Is(err, store.ErrConflict) {
		return fmt.Errorf("%w: %s", ErrExists, r.ID)
	} else if err != nil {
		return err
	}
	r.raw = data
	return nil
}

// update applies fn to the record of the session id, creating it (with
// the title title) when it does not exist and create is set.
func (ss *Sessions) update(ctx context.Context, id string, create bool, title string, fn func(r *Record) (changed bool, err error)) error {
	return ss.change(ctx, id, create, title, change{}, fn)
}

// change is what a caller of Sessions.change knows of the change.
type change struct {
	// known, when set, is the record the caller has just read, at
	// version: the first attempt starts from it instead of reading the
	// record again.
	known   *Record
	version int64
	// added are the messages fn may add to the session, of size bytes as
	// stored: the cache then keeps the session's messages with them.
	added []model.Message
	size  int
}

// change is update for a change c describes.
func (ss *Sessions) change(ctx context.Context, id string, create bool, title string, c change, fn func(r *Record) (changed bool, err error)) error {
	known, version := c.known, c.version
	for {
		var r *Record
		var err error
		if known != nil {
			r, known = known, nil
		} else {
			r, version, err = ss.Get(ctx, id)
		}
		if errors.Is(err, store.ErrNotFound) {
			if !create {
				return nil
			}
			now := ss.now()
			r = &Record{Format: format, ID: id, Title: title, CreatedAt: now, UpdatedAt: now}
			if _, err := fn(r); err != nil {
				return err
			}
			err := ss.create(ctx, r)
			if errors.Is(err, ErrExists) {
				continue // created meanwhile: update it
			}
			if err == nil && r.Count == len(c.added) {
				ss.cache.set(id, r.raw, c.added, c.size)
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
				if _, err := ss.putPart(ctx, id, "legacy", r.Messages); err != nil {
					return err
				}
				r.Parts = append([]string{"legacy"}, r.Parts...)
			}
			r.Messages = nil
		}
		r.Format = format
		if err := ss.roll(ctx, r); err != nil {
			return err
		}
		r.UpdatedAt = ss.now()
		data, err := json.Marshal(r)
		if err != nil {
			return err
		}
		if _, err := ss.store.Put(ctx, store.KindSession, id, data, version); errors.Is(err, store.ErrConflict) {
			continue
		} else if err != nil {
			return err
		}
		switch r.Count {
		case count:
			ss.cache.moved(id, old, data, nil, 0)
		case count + len(c.added):
			ss.cache.moved(id, old, data, c.added, c.size)
		default:
			ss.cache.forget(id)
		}
		return nil
	}
}

// StartRun records that the run run of the session id started: the
// session is created if it is new, with the start of prompt as title.
// known, when set, is the record of the session as the caller has just
// read it, at version.
func (ss *Sessions) StartRun(ctx context.Context, id, run, prompt string, known *Record, version int64) error {
	c := change{}
	if known != nil && known.ID == id {
		c.known, c.version = known, version
	}
	return ss.change(ctx, id, true, TitleFrom(prompt), c, func(r *Record) (bool, error) {
		if slices.Contains(r.Active, run) || slices.Contains(r.Runs, run) {
			return false, nil
		}
		r.Active = append(r.Active, run)
		return true, nil
	})
}

// RunEnd is what a run's end adds to its session.
type RunEnd struct {
	// Session and Run name the session and the run.
	Session, Run string
	// Adds reports that the run completed (or handed off): it adds its
	// messages (Messages) and its compaction.
	Adds     bool
	Messages []model.Message
	// Usage and Cost are what the run spent.
	Usage model.Usage
	Cost  model.Cost
	// Compacted is the run's compaction, if any, and HistoryLen how many
	// of the session's messages the run started from.
	Compacted  *Compacted
	HistoryLen int
}

// EndRun records that a run of a session ended: a run that completed (or
// handed off) adds its messages and its compaction, once; every run adds
// its usage and leaves the session's active runs.
func (ss *Sessions) EndRun(ctx context.Context, e RunEnd) error {
	var added []model.Message
	var size int
	if e.Adds && len(e.Messages) > 0 {
		var err error
		if size, err = ss.putPart(ctx, e.Session, e.Run, e.Messages); err != nil {
			return err
		}
		added = e.Messages
	}
	return ss.change(ctx, e.Session, e.Adds, TitleFrom(firstUserText(e.Messages)), change{added: added, size: size}, func(r *Record) (bool, error) {
		// A run that started in the session is active until its end is
		// applied. One that did not (its prompt refused, or cancelled
		// before it started) spent nothing and adds nothing: it is only
		// listed, unless it is among the last runs listed already.
		spent := e.Usage != (model.Usage{}) || e.Cost.USD != 0 || len(e.Cost.Unpriced) > 0
		if !slices.Contains(r.Active, e.Run) && (e.Adds || spent || slices.Contains(r.Runs, e.Run)) {
			return false, nil // ended before: this is a redelivery
		}
		r.Active = slices.DeleteFunc(r.Active, func(id string) bool { return id == e.Run })
		r.Usage, r.Cost = r.Usage.Add(e.Usage), r.Cost.Add(e.Cost)
		r.Runs = append(r.Runs, e.Run)
		if !e.Adds {
			return true, nil
		}
		// The run's compaction stands for the session's first messages when
		// they are those the run started from, as they are unless another
		// run of the session ended in between, and it covers the run's
		// history only.
		if c := e.Compacted; c != nil && (c.Upto <= e.HistoryLen || r.Count == e.HistoryLen) &&
			(r.Compacted == nil || r.Compacted.Upto < c.Upto) {
			r.Compacted = c
		}
		if len(e.Messages) > 0 {
			r.Parts = append(r.Parts, e.Run)
			r.Count += len(e.Messages)
		}
		return true, nil
	})
}

// TitleFrom derives a session's title from a prompt: its first line, up
// to 80 characters.
func TitleFrom(prompt string) string {
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

// Append adds msgs to the end of the stored session id without a run:
// see session.Append.
func (ss *Sessions) Append(ctx context.Context, id string, msgs ...model.Message) error {
	if len(msgs) == 0 {
		return fmt.Errorf("session: append to %s: no messages", id)
	}
	if err := CheckConversation(msgs); err != nil {
		return fmt.Errorf("session: append to %s: %w", id, err)
	}
	r, version, err := ss.Get(ctx, id)
	if err != nil {
		return err
	}
	busy := func(r *Record) error {
		if len(r.Active) > 0 {
			return fmt.Errorf("%w: %s (run %s)", ErrBusy, id, r.Active[0])
		}
		return nil
	}
	if err := busy(r); err != nil {
		return err
	}
	msgs = model.CloneMessages(msgs) // the caller's stay the caller's
	name := "append-" + calf.NewID()
	size, err := ss.putPart(ctx, id, name, msgs)
	if err != nil {
		return fmt.Errorf("session: append to %s: %w", id, err)
	}
	applied := false
	err = ss.change(ctx, id, false, "", change{known: r, version: version, added: msgs, size: size}, func(r *Record) (bool, error) {
		if err := busy(r); err != nil {
			return false, err
		}
		r.Parts = append(r.Parts, name)
		r.Count += len(msgs)
		applied = true
		return true, nil
	})
	if err == nil && !applied {
		err = fmt.Errorf("session: load %s: %w", id, store.ErrNotFound) // deleted meanwhile
	}
	if err != nil {
		// The part is listed nowhere: remove it.
		if derr := ss.store.Delete(ctx, KindMessages, partKey(id, name), 0); derr != nil && !errors.Is(derr, store.ErrNotFound) {
			ss.log.Warn("session: remove the part of a refused append", "session", id, "err", derr)
		}
		return err
	}
	return nil
}

// SetTitle sets the title of the stored session id, or returns an error
// matching [store.ErrNotFound].
func (ss *Sessions) SetTitle(ctx context.Context, id, title string) error {
	if _, _, err := ss.Get(ctx, id); err != nil {
		return err
	}
	return ss.update(ctx, id, false, "", func(r *Record) (bool, error) {
		r.Title = title
		return true, nil
	})
}

// SetBudget sets the budget of the session id (nil: none), creating the
// session if it does not exist, and returns the session's runs in
// progress, which the caller tells of the new budget.
func (ss *Sessions) SetBudget(ctx context.Context, id string, b *Budget) (active []string, err error) {
	err = ss.update(ctx, id, true, "", func(r *Record) (bool, error) {
		r.Budget, active = b, slices.Clone(r.Active)
		return true, nil
	})
	return active, err
}

// SetToolAllowed adds the tool name to the session's allowed tools
// (creating the session if it does not exist), or removes it.
func (ss *Sessions) SetToolAllowed(ctx context.Context, id, name string, allow bool) error {
	return ss.update(ctx, id, allow, "", func(r *Record) (bool, error) {
		has := slices.Contains(r.AllowedTools, name)
		switch {
		case allow && !has:
			r.AllowedTools = append(r.AllowedTools, name)
		case !allow && has:
			r.AllowedTools = slices.DeleteFunc(r.AllowedTools, func(t string) bool { return t == name })
		default:
			return false, nil
		}
		return true, nil
	})
}

// Allows reports whether the session id allows the tool name without
// asking; a missing session allows nothing.
func (ss *Sessions) Allows(ctx context.Context, id, name string) (bool, error) {
	if id == "" {
		return false, nil
	}
	r, _, err := ss.Get(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return slices.Contains(r.AllowedTools, name), nil
}

// Write stores the session r with the messages msgs, as one part named
// name, over the stored session with its id when replace is set, and
// returns [ErrExists] when one is stored and replace is not set. Of r, it
// keeps the description (title, runs, compaction, allowed tools, usage,
// cost, budget, origin, creation time: now when zero) and sets the rest.
func (ss *Sessions) Write(ctx context.Context, r *Record, msgs []model.Message, name string, replace bool) error {
	if err := adapter.CheckKey(store.KindSession, r.ID); err != nil {
		return err
	}
	defer ss.cache.forget(r.ID)
	old, _, err := ss.Get(ctx, r.ID)
	switch {
	case err == nil && !replace:
		return fmt.Errorf("%w: %s", ErrExists, r.ID)
	case err != nil && !errors.Is(err, store.ErrNotFound):
		return err
	}
	if len(msgs) > 0 {
		if _, err := ss.putPart(ctx, r.ID, name, msgs); err != nil {
			return err
		}
	}
	now := ss.now()
	r.Format, r.Epoch, r.Count, r.UpdatedAt = format, newEpoch(), len(msgs), now
	r.Parts, r.PartChunks, r.RunChunks, r.Messages, r.Active = nil, 0, 0, nil, nil
	if r.CreatedAt.IsZero() {
		r.CreatedAt = now
	}
	if len(msgs) > 0 {
		r.Parts = []string{name}
	}
	if old == nil {
		return ss.create(ctx, r)
	}
	if !old.CreatedAt.Equal(r.CreatedAt) {
		if _, err := ss.store.Put(ctx, KindIndex, indexKey(r.ID, r.CreatedAt), []byte("{}"), 0); err != nil && !errors.Is(err, store.ErrConflict) {
			return err
		}
	}
	if err := ss.roll(ctx, r); err != nil {
		return err
	}
	oldParts, err := ss.chunked(ctx, old, 'p', old.PartChunks, old.Parts)
	if err != nil {
		ss.log.Warn("session: a replaced session's messages are not all known", "session", r.ID, "err", err)
	}
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if _, err := store.Update(ctx, ss.store, store.KindSession, r.ID, func([]byte, bool) ([]byte, error) { return data, nil }); err != nil {
		return err
	}
	// The replaced session's parts, chunks and index entry go.
	if !old.CreatedAt.Equal(r.CreatedAt) {
		_ = ss.store.Delete(ctx, KindIndex, indexKey(old.ID, old.CreatedAt), 0)
	}
	for _, p := range oldParts {
		if p != name {
			if err := ss.store.Delete(ctx, KindMessages, partKey(r.ID, p), 0); err != nil {
				ss.log.Warn("session: a replaced session's messages were not deleted", "session", r.ID, "part", p, "err", err)
			}
		}
	}
	if err := ss.deleteChunks(ctx, old); err != nil {
		ss.log.Warn("session: a replaced session's chunks were not deleted", "session", r.ID, "err", err)
	}
	return nil
}

// deleteChunks removes the chunks of the session record r.
func (ss *Sessions) deleteChunks(ctx context.Context, r *Record) error {
	for what, n := range map[byte]int{'p': r.PartChunks, 'r': r.RunChunks} {
		for i := range n {
			if err := ss.store.Delete(ctx, KindChunk, chunkKey(r, what, i), 0); err != nil {
				return err
			}
		}
	}
	return nil
}

// Delete removes a stored session, its messages, its custom agents' state
// and its index entry. Deleting a missing session is not an error.
func (ss *Sessions) Delete(ctx context.Context, id string) error {
	defer ss.cache.forget(id)
	r, version, err := ss.Get(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil && !errors.Is(err, records.ErrCorrupt) {
		return err
	}
	if err := ss.store.Delete(ctx, store.KindSession, id, version); err != nil {
		return fmt.Errorf("session: delete %s: %w", id, err)
	}
	if err := ss.deleteAgentStates(ctx, id); err != nil {
		return fmt.Errorf("session: delete %s: %w", id, err)
	}
	if r == nil {
		return nil // corrupt: its parts are not known
	}
	parts, err := ss.chunked(ctx, r, 'p', r.PartChunks, r.Parts)
	if err != nil {
		return fmt.Errorf("session: delete %s: %w", id, err)
	}
	for _, p := range parts {
		if err := ss.store.Delete(ctx, KindMessages, partKey(id, p), 0); err != nil {
			return fmt.Errorf("session: delete %s: %w", id, err)
		}
	}
	if err := ss.deleteChunks(ctx, r); err != nil {
		return fmt.Errorf("session: delete %s: %w", id, err)
	}
	return ss.store.Delete(ctx, KindIndex, indexKey(id, r.CreatedAt), 0)
}

// List returns the records of up to limit stored sessions, newest (by
// creation) first, after the index entry after (empty: from the first),
// and the entry to list the next page after, empty at the end.
func (ss *Sessions) List(ctx context.Context, limit int, after string) ([]*Record, string, error) {
	var out []*Record
	for len(out) < limit {
		want := limit - len(out)
		recs, err := ss.store.List(ctx, KindIndex, "", after, want)
		if err != nil {
			return nil, "", fmt.Errorf("session: list: %w", err)
		}
		for _, rec := range recs {
			after = rec.ID
			_, id, ok := strings.Cut(rec.ID, "/")
			if !ok {
				continue
			}
			r, _, err := ss.Get(ctx, id)
			if errors.Is(err, store.ErrNotFound) {
				continue // being created, or deleted
			}
			if err != nil {
				return nil, "", err
			}
			if indexKey(id, r.CreatedAt) != rec.ID {
				continue // an entry the session outlived
			}
			out = append(out, r)
		}
		if len(recs) < want {
			return out, "", nil
		}
	}
	more, err := ss.store.List(ctx, KindIndex, "", after, 1)
	if err != nil {
		return nil, "", fmt.Errorf("session: list: %w", err)
	}
	if len(more) == 0 {
		after = ""
	}
	return out, after, nil
}

// AgentStatePrefix is the prefix of the ids of the custom agents' state
// records of session.
func AgentStatePrefix(session string) string {
	return strconv.Itoa(len(session)) + ":" + session + "/"
}

// CopyAgentStates gives the session to the custom agents' state in the
// session from (without the record of the step that wrote it).
func (ss *Sessions) CopyAgentStates(ctx context.Context, from, to string) error {
	recs, err := ss.store.List(ctx, KindAgentState, AgentStatePrefix(from), "", 0)
	if err != nil {
		return err
	}
	for _, r := range recs {
		// The state of agent's stateRecord, without the rest.
		var rec struct {
			State json.RawMessage `json:"state,omitempty"`
		}
		if err := json.Unmarshal(r.Data, &rec); err != nil {
			continue // corrupt: the fork starts from the zero state
		}
		data, err := json.Marshal(rec)
		if err != nil {
			return err
		}
		agent := strings.TrimPrefix(r.ID, AgentStatePrefix(from))
		if _, err := ss.store.Put(ctx, KindAgentState, AgentStatePrefix(to)+agent, data, 0); err != nil && !errors.Is(err, store.ErrConflict) {
			return err
		}
	}
	return nil
}

// deleteAgentStates deletes the custom agents' state in session.
func (ss *Sessions) deleteAgentStates(ctx context.Context, session string) error {
	recs, err := ss.store.List(ctx, KindAgentState, AgentStatePrefix(session), "", 0)
	if err != nil {
		return err
	}
	for _, r := range recs {
		if err := ss.store.Delete(ctx, KindAgentState, r.ID, 0); err != nil {
			return err
		}
	}
	return nil
}

// CheckConversation reports the first message of msgs that does not make
// a conversation a model can be given: a role it does not know, a tool
// result that answers no call of the assistant message before it (or one
// answered already), an assistant message whose calls lack ids or share
// one, or calls left unanswered when the next turn starts or the
// conversation ends. Messages are numbered from 0.
func CheckConversation(msgs []model.Message) error {
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
