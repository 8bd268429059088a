package eventlog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/internal/lru"
	"github.com/calf-go/calf/store"
)

// KindEvent is the kind of the records of logged events, with ids
// "{log}/{seq}", seq in 12 decimal digits so that ids sort as numbers.
const KindEvent = "event"

// NoticeChannel carries a notice, with the log's id as correlation id,
// each time an event is added to a log, for [Log.Follow] in any process.
const NoticeChannel = "calf.eventlog.appended"

// DefaultPatterns are the channels a recorder logs by default: every
// agent's, team's and workflow's events, and every message between the
// participants of a conversation (calf.conv.{conversation}.{from}.{to},
// package conversation's channels; not calf.conv.> as a whole, whose
// calf.conv.external.{prototype} repeats those messages for external
// agents).
var DefaultPatterns = []string{"calf.agent.>", "calf.team.>", "calf.workflow.>", ConversationPattern}

// ConversationPattern matches the channels of conversations,
// calf.conv.{conversation}.{from}.{to}. Their messages go to the log of
// their conversation ([LogOf]).
const ConversationPattern = "calf.conv.*.*.*"

// DefaultGroup is the consumer group of recorders.
const DefaultGroup = "calf.eventlog"

// Event is one message of a log, in the order the log received it.
type Event struct {
	// Log is the log's id: the correlation id of its messages.
	Log string `json:"log"`
	// Seq numbers the log's events from 1, without gaps.
	Seq int64 `json:"seq"`
	// Message is the event as it travelled on the broker.
	Message *calf.Message `json:"message"`
	// Logged is when the recorder added it.
	Logged time.Time `json:"logged"`
}

// ID returns "{log}/{seq}", the id a client gives to resume after it.
func (e Event) ID() string { return e.Log + "/" + strconv.FormatInt(e.Seq, 10) }

// ParseID splits an event id into its log and its sequence number.
func ParseID(id string) (log string, seq int64, err error) {
	i := strings.LastIndexByte(id, '/')
	if i <= 0 {
		return "", 0, fmt.Errorf("eventlog: event id %q is not LOG/SEQ", id)
	}
	seq, err = strconv.ParseInt(id[i+1:], 10, 64)
	if err != nil || seq < 0 {
		return "", 0, fmt.Errorf("eventlog: event id %q is not LOG/SEQ", id)
	}
	return id[:i], seq, nil
}

func recordID(log string, seq int64) string { return fmt.Sprintf("%s/%012d", log, seq) }

// LogOf returns the log a message belongs to: for a message on a
// conversation's channel ([ConversationPattern]), the conversation's id, so
// that a conversation's messages between its user and its agents, and
// between agents, are one log, whichever request or run they answer;
// otherwise its correlation id (an agent run's id, carried on by the runs
// it starts), else its run id, else its key up to the first "/". Empty for
// a message of no run.
func LogOf(m *calf.Message) string {
	if conv, ok := conversationOf(m.Channel); ok {
		return conv
	}
	if m.Metadata.CorrelationID != "" {
		return m.Metadata.CorrelationID
	}
	if m.Metadata.RunID != "" {
		return m.Metadata.RunID
	}
	k, _, _ := strings.Cut(m.Key, "/")
	return k
}

// Log keeps the events of runs in a store, a log per correlation id, and
// reads and follows them. Its recorder ([Log.Record]) subscribes to the
// broker like any handler; reading and following need only the store and
// the client.
type Log struct {
	c   *calf.Client
	st  store.Store
	now func() time.Time

	mu    sync.Mutex
	heads *lru.Cache[string, *head] // logs this process appended to
}

// head is what this process knows of a log's end.
type head struct {
	mu      sync.Mutex
	next    int64               // the next sequence number, 0 until read
	ids     map[string]struct{} // message ids logged
	changed chan struct{}       // closed and replaced at each append
}

// maxHeads bounds the logs a process remembers the end of, forgetting
// those appended to least recently; a log it forgot is read from the
// store again.
const maxHeads = 4096

// New returns the log of runs in st, whose notices go through c.
func New(c *calf.Client, st store.Store) *Log {
	return &Log{c: c, st: st, now: c.Now, heads: lru.New[string, *head](maxHeads, 0)}
}

// Options configure a recorder.
type Options struct {
	// Patterns are the channels logged. Default: DefaultPatterns.
	Patterns []string
	// Group starts the names of the recorders' consumer groups, one per
	// pattern ("calf.eventlog.agent.all" for "calf.agent.>"): recorders
	// of one group in many processes share the work. Default:
	// DefaultGroup.
	Group string
}

// Record subscribes a recorder that adds each message of the patterns to
// the log of its run ([LogOf]) once, however often it is delivered, and
// then emits a notice on [NoticeChannel]. It records until the client is
// shut down. Messages of no run are not logged.
func (l *Log) Record(ctx context.Context, opts *Options) error {
	var o Options
	if opts != nil {
		o = *opts
	}
	if len(o.Patterns) == 0 {
		o.Patterns = DefaultPatterns
	}
	if o.Group == "" {
		o.Group = DefaultGroup
	}
	for _, p := range o.Patterns {
		// A group has one pattern: each pattern has a group of its own.
		group := o.Group + "." + groupName.Replace(strings.TrimPrefix(p, "calf."))
		if err := l.c.Handle(ctx, p, l.record, &calf.SubscribeOptions{Group: group, MaxAttempts: recordAttempts}); err != nil {
			return fmt.Errorf("eventlog: record %s: %w", p, err)
		}
	}
	return nil
}

// groupName turns a pattern into the end of a group's name.
var groupName = strings.NewReplacer(">", "all", "*", "any")

// record is the recorder's handler.
func (l *Log) record(ctx context.Context, m *calf.Message) error {
	log := LogOf(m)
	if log == "" {
		return nil
	}
	if err := l.waitForCause(ctx, log, m); err != nil {
		return err
	}
	seq, added, err := l.Append(ctx, log, m)
	if err != nil || !added {
		return err
	}
	if ended, _ := Ended(Event{Log: log, Seq: seq, Message: m}, log); ended {
		// The run is over: its log's end need not be remembered here.
		l.mu.Lock()
		l.heads.Remove(log)
		l.mu.Unlock()
	}
	data, _ := json.Marshal(notice{Seq: seq})
	return l.c.Publish(ctx, &calf.Message{
		ID: log + ".logged." + strconv.FormatInt(seq, 10), Channel: NoticeChannel, Key: log, Data: data,
		Metadata: calf.Metadata{CorrelationID: log, Traceparent: m.Metadata.Traceparent},
	})
}

// causeWait bounds how long one delivery of a message is held for what
// comes before it; holdAttempts is how many deliveries are held, before
// one is logged whatever is missing. A message held in vain is handed back
// to the broker, which delivers it again later: what it waits for may be
// in the hands of a recorder that died, until the broker gives it to
// another. recordAttempts is the recorders' MaxAttempts.
const (
	causeWait      = 2 * time.Second
	holdAttempts   = 6
	recordAttempts = 10
)

// errHeld is returned for a message whose prerequisites are not logged
// yet, so that the broker delivers it again.
var errHeld = errors.New("eventlog: held for the messages that come before it")

// waitForCause holds m until what must come before it in its run is
// logged. A broker orders the messages of one key, and a run's tool calls
// travel under keys of their own, so a tool call may reach the recorder
// before the inference that made it, or before the text its step
// streamed. What comes first ([before]): the message that caused m, when
// it belongs to the same run, and the last stream delta that a tool call
// or an output counts. It waits for this process's appends and for the
// notices of other processes' recorders.
func (l *Log) waitForCause(ctx context.Context, log string, m *calf.Message) error {
	need := before(m)
	if len(need) == 0 {
		return nil
	}
	h := l.head(log)
	logged := func() (bool, <-chan struct{}, error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.next == 0 {
			if err := l.load(ctx, log, h); err != nil {
				return false, nil, err
			}
		}
		for _, id := range need {
			if _, ok := h.ids[id]; !ok {
				return false, h.changed, nil
			}
		}
		return true, nil, nil
	}
	done, changed, err := logged()
	if err == nil && !done {
		err = l.wait(ctx, log, logged, changed)
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errHeld) && m.Metadata.Attempt >= holdAttempts:
		return nil // waited long enough: log it where it arrived
	}
	return err
}

// wait waits until logged holds: it looks again at each change of this
// process's head (changed, then the channel logged returns) and at each
// notice of another process's recorder, for up to causeWait, and then
// reports errHeld.
func (l *Log) wait(ctx context.Context, log string, logged func() (bool, <-chan struct{}, error), changed <-chan struct{}) error {
	// Follow other processes' notices before looking again, so that none
	// is missed between.
	f, err := l.c.Follow(ctx, NoticeChannel, log)
	if err != nil {
		return err
	}
	defer f.Close()
	wctx, cancel := context.WithTimeout(ctx, causeWait)
	defer cancel()
	notices := make(chan struct{}, 1)
	go func() {
		for {
			if _, err := f.Next(wctx); err != nil {
				return
			}
			select {
			case notices <- struct{}{}:
			default:
			}
		}
	}()
	for {
		done, ch, err := logged()
		if done || err != nil {
			return err
		}
		if ch != nil {
			changed = ch
		}
		select {
		case <-changed:
		case <-notices:
			// Another process appended: read the log again.
			h := l.head(log)
			h.mu.Lock()
			h.next = 0
			h.mu.Unlock()
		case <-wctx.Done():
			if err := ctx.Err(); err != nil {
				return err
			}
			return errHeld
		}
	}
}

// before returns the ids of the messages of m's run that come before m:
// its cause, and for a tool call or an output the last delta its step
// streamed ("{run}.stream.{step}.{deltas}", see docs/channels.md).
func before(m *calf.Message) []string {
	run := m.Metadata.RunID
	if run == "" {
		return nil
	}
	if _, ok := conversationOf(m.Channel); ok {
		// Its log is its conversation's, whose messages the broker
		// orders by their key, the conversation; the run whose metadata
		// it carries logs elsewhere.
		return nil
	}
	var need []string
	if c := m.Metadata.CausationID; strings.HasPrefix(c, run+".") {
		need = append(need, c)
	}
	toolCall := strings.Contains(m.Channel, ".tool_call.")
	if toolCall || strings.HasSuffix(m.Channel, ".output") {
		var p struct {
			Step   int `json:"step"`
			Steps  int `json:"steps"`
			Deltas int `json:"deltas"`
		}
		if json.Unmarshal(m.Data, &p) == nil && p.Deltas > 0 {
			step := p.Step
			if !toolCall {
				step = p.Steps
			}
			need = append(need, fmt.Sprintf("%s.stream.%d.%d", run, step, p.Deltas))
		}
	}
	return need
}

// conversationOf returns the conversation of a conversation channel,
// calf.conv.{conversation}.{from}.{to}.
func conversationOf(channel string) (string, bool) {
	rest, ok := strings.CutPrefix(channel, "calf.conv.")
	if !ok || strings.Count(rest, ".") != 2 {
		return "", false
	}
	conv, _, _ := strings.Cut(rest, ".")
	return conv, conv != ""
}

// notice is the payload of a message on NoticeChannel.
type notice struct {
	Seq int64 `json:"seq"`
}

// Append adds m to the log log unless a message of its id is there
// already, and returns its sequence number and whether it was added.
// Appends to one log from many processes are safe: each takes the next
// free sequence number with a create-only write.
func (l *Log) Append(ctx context.Context, log string, m *calf.Message) (int64, bool, error) {
	h := l.head(log)
	h.mu.Lock()
	defer h.mu.Unlock()
	for attempt := 0; ; attempt++ {
		if h.next == 0 {
			if err := l.load(ctx, log, h); err != nil {
				return 0, false, err
			}
		}
		if _, dup := h.ids[m.ID]; dup {
			return 0, false, nil
		}
		data, err := json.Marshal(Event{Log: log, Seq: h.next, Message: m, Logged: l.now()})
		if err != nil {
			return 0, false, fmt.Errorf("eventlog: encode %s: %w", m.ID, err)
		}
		_, err = l.st.Put(ctx, KindEvent, recordID(log, h.next), data, 0)
		switch {
		case err == nil:
			seq := h.next
			h.next++
			h.ids[m.ID] = struct{}{}
			close(h.changed)
			h.changed = make(chan struct{})
			return seq, true, nil
		case errors.Is(err, store.ErrConflict) && attempt < 10:
			// Another process appended: read the log's end again.
			h.next = 0
		default:
			return 0, false, fmt.Errorf("eventlog: append %s to %s: %w", m.ID, log, err)
		}
	}
}

// head returns this process's head of log, forgetting the one used least
// recently when it knows too many.
func (l *Log) head(log string) *head {
	l.mu.Lock()
	defer l.mu.Unlock()
	h, ok := l.heads.Get(log)
	if !ok {
		h = &head{changed: make(chan struct{})}
		l.heads.Add(log, h)
	}
	return h
}

// load reads the ids and the end of log into h.
func (l *Log) load(ctx context.Context, log string, h *head) error {
	h.ids = map[string]struct{}{}
	h.next = 1
	for ev, err := range l.events(ctx, log, 0) {
		if err != nil {
			return err
		}
		h.ids[ev.Message.ID] = struct{}{}
		h.next = ev.Seq + 1
	}
	return nil
}

// readPage is how many records a read takes at once.
const readPage = 256

// events yields the events of log after seq from the store.
func (l *Log) events(ctx context.Context, log string, after int64) iter.Seq2[Event, error] {
	return events(ctx, l.st, log, after)
}

// events yields the events of log after seq from st.
func events(ctx context.Context, st store.Store, log string, after int64) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		from := ""
		if after > 0 {
			from = recordID(log, after)
		}
		for {
			recs, err := st.List(ctx, KindEvent, log+"/", from, readPage)
			if err != nil {
				yield(Event{}, fmt.Errorf("eventlog: read %s: %w", log, err))
				return
			}
			for _, r := range recs {
				var ev Event
				if err := json.Unmarshal(r.Data, &ev); err != nil {
					yield(Event{}, fmt.Errorf("eventlog: record %s/%s is corrupt: %w", r.Kind, r.ID, err))
					return
				}
				if !yield(ev, nil) {
					return
				}
				from = r.ID
			}
			if len(recs) < readPage {
				return
			}
		}
	}
}

// Read returns the events of log after the sequence number after (0: from
// the start), at most limit of them (0: all).
func (l *Log) Read(ctx context.Context, log string, after int64, limit int) ([]Event, error) {
	return Read(ctx, l.st, log, after, limit)
}

// Read returns the events of log in st after the sequence number after
// (0: from the start), at most limit of them (0: all), for a reader that
// has no broker.
func Read(ctx context.Context, st store.Store, log string, after int64, limit int) ([]Event, error) {
	var out []Event
	for ev, err := range events(ctx, st, log, after) {
		if err != nil {
			return nil, err
		}
		out = append(out, ev)
		if limit > 0 && len(out) == limit {
			break
		}
	}
	return out, nil
}

// Follow yields the events of log after the sequence number after, the
// ones logged already and then each as the recorder adds it, in order and
// once each, until ctx ends (its error is then yielded) or the caller
// stops. [Ended] tells the end of a run's events.
func (l *Log) Follow(ctx context.Context, log string, after int64) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		// Follow notices before reading, so that none is missed between.
		f, err := l.c.Follow(ctx, NoticeChannel, log)
		if err != nil {
			yield(Event{}, fmt.Errorf("eventlog: follow %s: %w", log, err))
			return
		}
		defer f.Close()
		for {
			for ev, err := range l.events(ctx, log, after) {
				if err != nil {
					yield(Event{}, err)
					return
				}
				after = ev.Seq
				if !yield(ev, nil) {
					return
				}
			}
			// Wait for a notice of an event after the last one read.
			for {
				m, err := f.Next(ctx)
				if err != nil {
					if ctx.Err() != nil {
						err = ctx.Err()
					}
					yield(Event{}, err)
					return
				}
				var n notice
				if json.Unmarshal(m.Data, &n) == nil && n.Seq > after {
					break
				}
			}
		}
	}
}

// FollowRun is Follow for the events of the run named by the log's id, and
// of the runs it hands off to: it ends, after yielding it, with the event
// that [Ended] says ends them. A follower that resumes after some events
// (after > 0) is told where the chain stands from the events it has seen:
// after a handoff it waits for the output of the run handed off to, and
// after the end it yields nothing and ends at once.
func (l *Log) FollowRun(ctx context.Context, run string, after int64) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		watch := run
		if after > 0 {
			for e, err := range l.events(ctx, run, 0) {
				if err != nil {
					yield(Event{}, err)
					return
				}
				if e.Seq > after {
					break
				}
				var ended bool
				if ended, watch = Ended(e, watch); ended {
					return
				}
			}
		}
		for e, err := range l.Follow(ctx, run, after) {
			if !yield(e, err) || err != nil {
				return
			}
			var ended bool
			if ended, watch = Ended(e, watch); ended {
				return
			}
		}
	}
}

// Ended reports whether ev ends the events of its log: the output of the
// run the log is named after, or, when that run handed off, of the last
// run of its chain. next is the run to watch for, starting with the log's
// id; Ended returns the run to watch after ev.
func Ended(ev Event, next string) (ended bool, watch string) {
	m := ev.Message
	if !strings.HasSuffix(m.Channel, ".output") || !strings.HasPrefix(m.Channel, "calf.") {
		return false, next
	}
	run, _, _ := strings.Cut(m.Key, "/")
	if run != next {
		return false, next
	}
	var out struct {
		Status  string `json:"status"`
		Handoff *struct {
			RunID string `json:"run_id"`
		} `json:"handoff"`
	}
	if json.Unmarshal(m.Data, &out) == nil && out.Status == "handoff" && out.Handoff != nil && out.Handoff.RunID != "" {
		return false, out.Handoff.RunID
	}
	return true, next
}

// Delete removes the events of log, for the retention sweep of ended
// runs.
func (l *Log) Delete(ctx context.Context, log string) error {
	if _, err := deleteLog(ctx, l.st, log); err != nil {
		return err
	}
	l.mu.Lock()
	l.heads.Remove(log)
	l.mu.Unlock()
	return nil
}

// Sweep removes the logs whose last event was logged before before, and
// returns how many logs and records it removed. It has the shape of an
// store.Sweeper: register it with the runtime's AddSweeper, so that a
// worker's retention removes the logs of old runs with the runs.
func Sweep(ctx context.Context, st store.Store, before time.Time) (logs, records int, err error) {
	last := map[string]time.Time{}
	after := ""
	for {
		recs, err := st.List(ctx, KindEvent, "", after, readPage)
		if err != nil {
			return logs, records, err
		}
		for _, r := range recs {
			i := strings.LastIndexByte(r.ID, '/')
			if i <= 0 {
				continue
			}
			if t := r.UpdatedAt; t.After(last[r.ID[:i]]) {
				last[r.ID[:i]] = t
			}
			after = r.ID
		}
		if len(recs) < readPage {
			break
		}
	}
	for log, t := range last {
		if !t.Before(before) {
			continue
		}
		n, err := deleteLog(ctx, st, log)
		records += n
		if err != nil {
			return logs, records, err
		}
		logs++
	}
	return logs, records, nil
}

// deleteLog removes the records of log and returns how many it removed.
func deleteLog(ctx context.Context, st store.Store, log string) (int, error) {
	n := 0
	for {
		recs, err := st.List(ctx, KindEvent, log+"/", "", readPage)
		if err != nil {
			return n, err
		}
		for _, r := range recs {
			if err := st.Delete(ctx, KindEvent, r.ID, 0); err != nil {
				return n, err
			}
			n++
		}
		if len(recs) < readPage {
			return n, nil
		}
	}
}
