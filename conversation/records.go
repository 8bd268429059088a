package conversation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/calf-go/calf/internal/convid"
	"github.com/calf-go/calf/store"
)

// Record kinds of conversations, instances and topics. Their values are
// those of the records already stored: never change them.
const (
	// kindConversation: one record per conversation, id the conversation's
	// UUID, data a [Conversation].
	kindConversation = "conversation"
	// kindInstance: one record per instance, id
	// "{conversation}/{instance id}", data an [Instance].
	kindInstance = "conversation_instance"
	// kindTopic: one record per pair of participants, id
	// "{conversation}/{topic name}", data a [Topic].
	kindTopic = "conversation_topic"
)

// Status is the status of a conversation or an instance.
type Status string

// The statuses.
const (
	StatusRunning Status = "running"
	StatusStopped Status = "stopped"
	// StatusError: an instance that failed (instances only).
	StatusError Status = "error"
)

// Conversation is the record of one conversation.
type Conversation struct {
	ID          string    `json:"id"`
	UserID      string    `json:"user_id,omitempty"`
	Description string    `json:"description,omitempty"`
	Created     time.Time `json:"created"`
	Status      Status    `json:"status"`
	// Stopped is when it was stopped; zero while it runs.
	Stopped time.Time `json:"stopped,omitzero"`
	// Entry is the instance the user's side talks to.
	Entry string `json:"entry"`
}

// Instance is the record of one instance of a prototype in a
// conversation. An idle instance is this record and nothing else.
type Instance struct {
	// ID is "{prototype}-{conversation}", as in
	// conversational-agent-{conversation}: a conversation holds at most one
	// instance of each prototype, so the id is its address.
	ID           string `json:"id"`
	Prototype    string `json:"prototype"`
	Conversation string `json:"conversation"`
	// Parent is the participant that started it: [UserParticipant] for
	// the conversation's entry instance, an instance id otherwise.
	Parent  string    `json:"parent"`
	Status  Status    `json:"status"`
	Created time.Time `json:"created"`
	Stopped time.Time `json:"stopped,omitzero"`
	// Error says why an instance in [StatusError] failed.
	Error string `json:"error,omitempty"`
}

// Topic is the record of the pair of participants that talk in a
// conversation. Each direction has its channel ([Channel]).
type Topic struct {
	// Name is the two participants' ids in byte order joined by a '.'.
	Name         string `json:"name"`
	Conversation string `json:"conversation"`
	// Participants are the participant that opened the topic, then the
	// other.
	Participants [2]string `json:"participants"`
	Created      time.Time `json:"created"`
}

// Channels returns the channels of the topic: from the first participant
// to the second, and back.
func (t Topic) Channels() (forth, back string) {
	forth, _ = Channel(t.Conversation, t.Participants[0], t.Participants[1])
	back, _ = Channel(t.Conversation, t.Participants[1], t.Participants[0])
	return forth, back
}

// Options configure [NewConversations]. Nil means the defaults.
type Options struct {
	// Entry names the prototype whose instance a new conversation starts
	// with and the user's side talks to. Default "conversational-agent".
	Entry string
	// Now returns the time. Default time.Now.
	Now func() time.Time
	// NewID returns a new conversation id, a canonical lowercase UUID
	// ([CheckConversationID]). Default: the random bits of [calf.NewID]
	// written as a version 4 UUID.
	NewID func() string
}

// Conversations keeps conversations, their instances and their topics in
// a store, and the prototypes they are made of.
type Conversations struct {
	s      store.Store
	protos *Prototypes
	entry  string
	now    func() time.Time
	newID  func() string
}

// NewConversations returns the conversations kept in s, made of the
// prototypes registered in s.
func NewConversations(s store.Store, opts *Options) *Conversations {
	c := &Conversations{s: s, protos: NewPrototypes(s), entry: "conversational-agent", now: time.Now, newID: newID}
	if opts != nil {
		if opts.Entry != "" {
			c.entry = opts.Entry
		}
		if opts.Now != nil {
			c.now = opts.Now
		}
		if opts.NewID != nil {
			c.newID = opts.NewID
		}
	}
	return c
}

// Prototypes returns the prototypes the conversations are made of.
func (c *Conversations) Prototypes() *Prototypes { return c.protos }

// Store returns the store the conversations are kept in.
func (c *Conversations) Store() store.Store { return c.s }

// NewConversation says what conversation [Conversations.Create] creates.
type NewConversation struct {
	// ID is the conversation's UUID. Default: a new one. Creating again
	// with an ID that exists, for the same user, returns the existing
	// conversation and completes what a failed Create left undone.
	ID          string
	UserID      string
	Description string
}

// Create creates a conversation: its record, an instance of the entry
// prototype ([Options.Entry], which must be registered) and the topic
// between the user's side ([UserParticipant]) and that instance.
func (c *Conversations) Create(ctx context.Context, nc NewConversation) (Conversation, error) {
	if nc.ID == "" {
		nc.ID = c.newID()
	}
	if err := convid.CheckConversationID(nc.ID); err != nil {
		return Conversation{}, err
	}
	if len(nc.UserID) > convid.MaxUserIDLen || len(nc.Description) > convid.MaxDescriptionLen {
		return Conversation{}, fmt.Errorf("%w: a user id is at most %d bytes, a description at most %d", ErrInvalidID, convid.MaxUserIDLen, convid.MaxDescriptionLen)
	}
	if _, err := c.protos.Get(ctx, c.entry); err != nil {
		return Conversation{}, fmt.Errorf("conversation: the entry prototype: %w", err)
	}
	conv := Conversation{ID: nc.ID, UserID: nc.UserID, Description: nc.Description, Created: c.now().UTC(), Status: StatusRunning, Entry: convid.InstanceID(c.entry, nc.ID)}
	data, err := json.Marshal(conv)
	if err != nil {
		return Conversation{}, err
	}
	if _, err := c.s.Put(ctx, kindConversation, conv.ID, data, 0); err != nil {
		if !errors.Is(err, store.ErrConflict) {
			return Conversation{}, err
		}
		// Created before, by this caller (a retry after a lost reply)
		// or by someone else.
		if conv, err = c.Get(ctx, nc.ID); err != nil {
			return Conversation{}, err
		}
		if conv.UserID != nc.UserID {
			return Conversation{}, fmt.Errorf("%w: conversation %s, of another user", ErrExists, nc.ID)
		}
	}
	if _, err := c.spawn(ctx, conv.ID, UserParticipant, c.entry); err != nil {
		return Conversation{}, err
	}
	return conv, nil
}

// Get returns the conversation, or an error matching [ErrNotFound].
func (c *Conversations) Get(ctx context.Context, id string) (Conversation, error) {
	var conv Conversation
	_, err := c.get(ctx, kindConversation, id, "conversation "+convid.Truncate(id), &conv)
	return conv, err
}

func (c *Conversations) get(ctx context.Context, kind, id, what string, v any) (store.Record, error) {
	rec, err := c.s.Get(ctx, kind, id)
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrInvalidKey) {
		return rec, fmt.Errorf("%w: %s", ErrNotFound, what)
	}
	if err != nil {
		return rec, err
	}
	if err := json.Unmarshal(rec.Data, v); err != nil {
		return rec, fmt.Errorf("conversation: %s: %w", what, err)
	}
	return rec, nil
}

// List returns the conversations, by id, at most limit of them (0: all)
// after the id after.
func (c *Conversations) List(ctx context.Context, after string, limit int) ([]Conversation, error) {
	return list[Conversation](ctx, c.s, kindConversation, "", after, limit)
}

func list[T any](ctx context.Context, s store.Store, kind, prefix, after string, limit int) ([]T, error) {
	var out []T
	for {
		page := 100
		if limit > 0 {
			page = min(page, limit-len(out))
		}
		recs, err := s.List(ctx, kind, prefix, after, page)
		if err != nil {
			return nil, err
		}
		for _, rec := range recs {
			var v T
			if err := json.Unmarshal(rec.Data, &v); err != nil {
				return nil, fmt.Errorf("conversation: %s %s: %w", kind, rec.ID, err)
			}
			out = append(out, v)
		}
		if len(recs) < page || limit > 0 && len(out) >= limit {
			return out, nil
		}
		after = recs[len(recs)-1].ID
	}
}

// Open returns the conversation if it runs, an error matching
// [ErrStopped] if it is stopped, or one matching [ErrNotFound].
func (c *Conversations) Open(ctx context.Context, id string) (Conversation, error) {
	conv, err := c.Get(ctx, id)
	if err != nil {
		return conv, err
	}
	if conv.Status != StatusRunning {
		return conv, fmt.Errorf("%w: conversation %s since %s", ErrStopped, id, conv.Stopped.Format(time.RFC3339))
	}
	return conv, nil
}

// Spawn starts an instance of prototype in the conversation on behalf of
// parent, an instance of the conversation whose prototype lists prototype
// among its subagents, and opens the topic between them. It is
// idempotent: a conversation holds one instance per prototype
// ("{prototype}-{conversation}"), so spawning again, from the same parent or another,
// returns the instance that exists (its record keeps the parent that
// started it) and opens the topic of the new pair if there is none. A
// stopped conversation refuses with an error matching [ErrStopped].
func (c *Conversations) Spawn(ctx context.Context, conversation, parent, prototype string) (Instance, error) {
	if parent == UserParticipant {
		return Instance{}, fmt.Errorf("%w: the user's side talks to the entry instance only", ErrNotSubagent)
	}
	if err := checkParticipant(parent, conversation); err != nil {
		return Instance{}, err
	}
	pi, err := c.Instance(ctx, conversation, parent)
	if err != nil {
		return Instance{}, err
	}
	pp, err := c.protos.Get(ctx, pi.Prototype)
	if err != nil {
		return Instance{}, err
	}
	if !contains(pp.Subagents, prototype) {
		return Instance{}, fmt.Errorf("%w: prototype %s lists no subagent %q", ErrNotSubagent, pp.Name, convid.Truncate(prototype))
	}
	return c.spawn(ctx, conversation, parent, prototype)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (c *Conversations) spawn(ctx context.Context, conversation, parent, prototype string) (Instance, error) {
	if _, err := c.Open(ctx, conversation); err != nil {
		return Instance{}, err
	}
	if _, err := c.protos.Get(ctx, prototype); err != nil {
		return Instance{}, err
	}
	inst := Instance{ID: convid.InstanceID(prototype, conversation), Prototype: prototype, Conversation: conversation, Parent: parent, Status: StatusRunning, Created: c.now().UTC()}
	data, err := json.Marshal(inst)
	if err != nil {
		return Instance{}, err
	}
	key := conversation + "/" + inst.ID
	// Create if absent: of concurrent or repeated creators one writes,
	// the others find its record.
	if _, err := c.s.Put(ctx, kindInstance, key, data, 0); err != nil {
		if !errors.Is(err, store.ErrConflict) {
			return Instance{}, err
		}
		if inst, err = c.Instance(ctx, conversation, inst.ID); err != nil {
			return Instance{}, err
		}
	}
	if err := c.openTopic(ctx, conversation, parent, inst.ID); err != nil {
		return Instance{}, err
	}
	// A Stop that listed the instances before this one was written has
	// marked the conversation stopped first: see it, and stop the
	// instance too.
	if _, err := c.Open(ctx, conversation); err != nil {
		if errors.Is(err, ErrStopped) {
			if serr := c.stopInstance(ctx, conversation, inst.ID); serr != nil {
				return Instance{}, errors.Join(err, serr)
			}
		}
		return Instance{}, err
	}
	return inst, nil
}

func (c *Conversations) openTopic(ctx context.Context, conversation, from, to string) error {
	t := Topic{Name: convid.TopicName(from, to), Conversation: conversation, Participants: [2]string{from, to}, Created: c.now().UTC()}
	if _, err := Channel(conversation, from, to); err != nil {
		return err
	}
	data, err := json.Marshal(t)
	if err != nil {
		return err
	}
	_, err = c.s.Put(ctx, kindTopic, conversation+"/"+t.Name, data, 0)
	if errors.Is(err, store.ErrConflict) {
		return nil // opened before
	}
	return err
}

// Instance returns the instance id of the conversation, or an error
// matching [ErrNotFound].
func (c *Conversations) Instance(ctx context.Context, conversation, id string) (Instance, error) {
	var inst Instance
	_, err := c.get(ctx, kindInstance, conversation+"/"+id, "instance "+convid.Truncate(id), &inst)
	return inst, err
}

// Instances returns the instances of the conversation, by id.
func (c *Conversations) Instances(ctx context.Context, conversation string) ([]Instance, error) {
	if err := convid.CheckConversationID(conversation); err != nil {
		return nil, err
	}
	return list[Instance](ctx, c.s, kindInstance, conversation+"/", "", 0)
}

// Topics returns the topics of the conversation, by name.
func (c *Conversations) Topics(ctx context.Context, conversation string) ([]Topic, error) {
	if err := convid.CheckConversationID(conversation); err != nil {
		return nil, err
	}
	return list[Topic](ctx, c.s, kindTopic, conversation+"/", "", 0)
}

// Topic returns the topic between participants a and b of the
// conversation, whichever of them opened it, or an error matching
// [ErrNotFound] when they have none.
func (c *Conversations) Topic(ctx context.Context, conversation, a, b string) (Topic, error) {
	var t Topic
	name := convid.TopicName(a, b)
	_, err := c.get(ctx, kindTopic, conversation+"/"+name, "topic "+name, &t)
	return t, err
}

// Route returns the channel of a message from participant from to
// participant to in the conversation, after checking that the
// conversation runs ([ErrStopped] otherwise) and that the two have a
// topic ([ErrNoTopic] otherwise).
func (c *Conversations) Route(ctx context.Context, conversation, from, to string) (string, error) {
	ch, err := Channel(conversation, from, to)
	if err != nil {
		return "", err
	}
	if _, err := c.Open(ctx, conversation); err != nil {
		return "", err
	}
	var t Topic
	if _, err := c.get(ctx, kindTopic, conversation+"/"+convid.TopicName(from, to), "topic "+convid.TopicName(from, to), &t); err != nil {
		if errors.Is(err, ErrNotFound) {
			return "", fmt.Errorf("%w: %s and %s in conversation %s", ErrNoTopic, from, to, conversation)
		}
		return "", err
	}
	return ch, nil
}

// Stop stops the conversation: its record first (so that it takes no new
// instance and no message from then on), then each of its instances,
// with the time of the stop. Stopping a stopped conversation again stops
// any instance still marked running and is otherwise no change.
func (c *Conversations) Stop(ctx context.Context, id string) (Conversation, error) {
	var conv Conversation
	_, err := store.Update(ctx, c.s, kindConversation, id, func(data []byte, exists bool) ([]byte, error) {
		if !exists {
			return nil, fmt.Errorf("%w: conversation %s", ErrNotFound, convid.Truncate(id))
		}
		if err := json.Unmarshal(data, &conv); err != nil {
			return nil, err
		}
		if conv.Status == StatusStopped {
			return nil, nil
		}
		conv.Status, conv.Stopped = StatusStopped, c.now().UTC()
		return json.Marshal(conv)
	})
	if errors.Is(err, store.ErrInvalidKey) {
		return conv, fmt.Errorf("%w: conversation %s", ErrNotFound, convid.Truncate(id))
	}
	if err != nil {
		return conv, err
	}
	insts, err := c.Instances(ctx, id)
	if err != nil {
		return conv, err
	}
	for _, inst := range insts {
		if inst.Status == StatusRunning {
			if err := c.stopInstance(ctx, id, inst.ID); err != nil {
				return conv, err
			}
		}
	}
	return conv, nil
}

func (c *Conversations) stopInstance(ctx context.Context, conversation, id string) error {
	return c.setInstance(ctx, conversation, id, StatusStopped, "")
}

// Fail marks an instance failed ([StatusError]) with the reason; a
// stopped or failed instance stays as it is. A [Host] fails an instance
// whose run ends in an error or that it cannot serve; a failed instance
// takes no message until [Conversations.Restart].
func (c *Conversations) Fail(ctx context.Context, conversation, id, reason string) error {
	if len(reason) > convid.MaxErrorLen {
		reason = reason[:convid.MaxErrorLen] + "…"
	}
	return c.setInstance(ctx, conversation, id, StatusError, reason)
}

// Restart puts a failed instance ([StatusError]) back to work: it is
// running again, without its error, and takes messages from then on; its
// session (what it said and heard before) is kept. The messages refused
// while it was failed are not sent again. Restarting an instance that
// runs changes nothing; a stopped instance, or one of a stopped
// conversation, is refused with an error matching [ErrStopped].
func (c *Conversations) Restart(ctx context.Context, conversation, id string) (Instance, error) {
	if _, err := c.Open(ctx, conversation); err != nil {
		return Instance{}, err
	}
	var inst Instance
	_, err := store.Update(ctx, c.s, kindInstance, conversation+"/"+id, func(data []byte, exists bool) ([]byte, error) {
		if !exists {
			return nil, fmt.Errorf("%w: instance %s", ErrNotFound, convid.Truncate(id))
		}
		if err := json.Unmarshal(data, &inst); err != nil {
			return nil, err
		}
		switch inst.Status {
		case StatusRunning:
			return nil, nil
		case StatusError:
			inst.Status, inst.Stopped, inst.Error = StatusRunning, time.Time{}, ""
			return json.Marshal(inst)
		default:
			return nil, fmt.Errorf("%w: instance %s is %s", ErrStopped, id, inst.Status)
		}
	})
	if errors.Is(err, store.ErrInvalidKey) {
		return inst, fmt.Errorf("%w: instance %s", ErrNotFound, convid.Truncate(id))
	}
	if err != nil {
		return inst, err
	}
	// The host's queue of an LLM instance remembers the failure too, so
	// that no message slips in between the failure and its record: clear
	// it (after the instance, so that a restart retried after a failure
	// here clears it then). The queue is the host's record: only its
	// "failed" field is read and cleared here, the others kept as they are.
	_, err = store.Update(ctx, c.s, convid.KindInbox, conversation+"/"+id, func(data []byte, exists bool) ([]byte, error) {
		if !exists {
			return nil, nil
		}
		var b map[string]json.RawMessage
		if err := json.Unmarshal(data, &b); err != nil {
			return nil, fmt.Errorf("conversation: inbox of %s: %w", id, err)
		}
		if _, failed := b["failed"]; !failed {
			return nil, nil
		}
		delete(b, "failed")
		return json.Marshal(b)
	})
	return inst, err
}

func (c *Conversations) setInstance(ctx context.Context, conversation, id string, st Status, reason string) error {
	_, err := store.Update(ctx, c.s, kindInstance, conversation+"/"+id, func(data []byte, exists bool) ([]byte, error) {
		if !exists {
			return nil, fmt.Errorf("%w: instance %s", ErrNotFound, convid.Truncate(id))
		}
		var inst Instance
		if err := json.Unmarshal(data, &inst); err != nil {
			return nil, err
		}
		if inst.Status != StatusRunning {
			return nil, nil
		}
		inst.Status, inst.Stopped, inst.Error = st, c.now().UTC(), reason
		return json.Marshal(inst)
	})
	if errors.Is(err, store.ErrInvalidKey) {
		return fmt.Errorf("%w: instance %s", ErrNotFound, convid.Truncate(id))
	}
	return err
}
