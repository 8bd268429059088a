package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/conversation"
	"github.com/calf-go/calf/eventlog"
	"github.com/calf-go/calf/internal/convid"
	"github.com/calf-go/calf/internal/httperr"
	"github.com/calf-go/calf/store"
)

// KindConversationHistory is the kind of the records in which a server
// keeps the user-facing history of a conversation, by conversation id:
// the messages on the user's two channels (the user's to the entry
// instance, and those to the user), in the order recorded.
const KindConversationHistory = "conversation_history"

// ConversationNoticeChannel carries a notice, with the conversation's id
// as correlation id, each time a message is added to a conversation's
// history, for the pages that follow it in any process.
const ConversationNoticeChannel = "calf.server.conversation.appended"

// ConversationGroup starts the names of the consumer groups of the
// recorders of conversations' histories ([Server.RecordConversations]).
const ConversationGroup = "calf.server.conversations"

// MaxConversationHistory bounds the messages a conversation's history
// keeps: the latest ones.
const MaxConversationHistory = 1000

// MaxConversationText bounds the text of a user's message to a
// conversation, in bytes.
const MaxConversationText = 32 << 10

// maxConversationsListed bounds GET /v1/conversations.
const maxConversationsListed = 100

// ConversationEntry is a message of a conversation's user-facing history:
// one the user sent to the entry instance, or one sent to the user.
type ConversationEntry struct {
	// Seq numbers the history's messages from 1, in the order recorded.
	Seq int64 `json:"seq"`
	// ID is the message's id on the broker.
	ID string `json:"id"`
	// From and To are the participants: [conversation.UserParticipant]
	// or an instance id.
	From string `json:"from"`
	To   string `json:"to"`
	// Message is the text; Command the words of a command, if any.
	Message string   `json:"message"`
	Command []string `json:"command,omitempty"`
	// CorrelationID is the user's message's: an answer carries the id of
	// the message it answers.
	CorrelationID string `json:"correlation_id,omitempty"`
	// Error says a message to the user reports a failure or a refusal
	// ([conversation.ConversationMessage.IsError]).
	Error bool      `json:"error,omitempty"`
	Time  time.Time `json:"time"`
}

// conversationHistory is a KindConversationHistory record.
type conversationHistory struct {
	// Next is the sequence number of the next message.
	Next    int64               `json:"next"`
	Entries []ConversationEntry `json:"entries"`
}

// conversationView is what GET /v1/conversations/{id} answers.
type conversationView struct {
	Conversation conversation.Conversation `json:"conversation"`
	Instances    []conversation.Instance   `json:"instances"`
	Topics       []conversation.Topic      `json:"topics"`
	// Messages is the user-facing history after ?after= (all by default).
	Messages []ConversationEntry `json:"messages"`
}

// errNoConversations is the error of a conversation asked of a server
// without conversations.
var errNoConversations = fmt.Errorf("%w: this server serves no conversations", errBadRequest)

// conversations returns the conversations of the server's host, or nil.
func (s *Server) conversations() *conversation.Conversations {
	if s.opts.Conversations == nil {
		return nil
	}
	return s.opts.Conversations.Conversations()
}

// RecordConversations subscribes the recorder of the conversations'
// user-facing histories: each message on a channel from or to the user's
// side of a conversation (calf.conv.{c}.user.{to}, calf.conv.{c}.{from}.user)
// is added once to its conversation's history (a [KindConversationHistory]
// record), whatever process sent it, then announced on
// [ConversationNoticeChannel]. The recorders of many processes share the
// work in the consumer groups [ConversationGroup].*; they record until the
// runtime's client shuts down. A server with [Options.Conversations] needs
// one recorder on its broker for the answers to reach its pages.
func (s *Server) RecordConversations(ctx context.Context) error {
	if s.opts.Conversations == nil {
		return errors.New("server: no conversations to record (Options.Conversations)")
	}
	for _, sub := range []struct{ pattern, group string }{
		{"calf.conv.*." + conversation.UserParticipant + ".*", ConversationGroup + ".from-user"},
		{"calf.conv.*.*." + conversation.UserParticipant, ConversationGroup + ".to-user"},
	} {
		if err := s.rt.Client().Handle(ctx, sub.pattern, s.recordConversationMessage, &calf.SubscribeOptions{Group: sub.group}); err != nil {
			return fmt.Errorf("server: record conversations: %w", err)
		}
	}
	return nil
}

// recordConversationMessage is the recorder's handler.
func (s *Server) recordConversationMessage(ctx context.Context, msg *calf.Message) error {
	parts := strings.Split(msg.Channel, ".")
	if len(parts) != 5 {
		return nil
	}
	conv, from, to := parts[2], parts[3], parts[4]
	m, err := conversation.DecodeMessage(msg.Data)
	if err != nil || m.ConversationID != conv {
		// The host parks it; nothing for the user to read.
		s.log.Warn("server: a conversation message that is none, not recorded", "channel", msg.Channel, "id", msg.ID, "err", err)
		return nil
	}
	_, _, err = s.appendHistory(ctx, conv, ConversationEntry{ID: msg.ID, From: from, To: to, Message: m.Message, Command: m.Command,
		CorrelationID: m.CorrelationID, Error: from != conversation.UserParticipant && m.IsError(), Time: m.Timestamp}, true)
	return err
}

// appendHistory adds e to the history of conv, unless a message of its
// id is there, and announces it; it returns the entry as recorded (with
// its sequence number) and whether it was added. again announces an entry
// found there too, for a message delivered again after its notice failed
// (a notice twice is harmless: followers read what is after what they
// showed).
func (s *Server) appendHistory(ctx context.Context, conv string, e ConversationEntry, again bool) (ConversationEntry, bool, error) {
	var added bool
	_, err := store.Update(ctx, s.rt.Store(), KindConversationHistory, conv, func(data []byte, exists bool) ([]byte, error) {
		added = false
		var h conversationHistory
		if exists {
			if err := json.Unmarshal(data, &h); err != nil {
				return nil, calf.Permanent(fmt.Errorf("server: the history of conversation %s: %w", conv, err))
			}
		}
		if i := slices.IndexFunc(h.Entries, func(o ConversationEntry) bool { return o.ID == e.ID }); i >= 0 {
			e = h.Entries[i]
			return nil, nil
		}
		h.Next = max(h.Next, 1)
		e.Seq = h.Next
		h.Next++
		h.Entries = append(h.Entries, e)
		if len(h.Entries) > MaxConversationHistory {
			h.Entries = slices.Clone(h.Entries[len(h.Entries)-MaxConversationHistory:])
		}
		added = true
		return json.Marshal(h)
	})
	if err != nil || !added && !again {
		return e, added, err
	}
	data, _ := json.Marshal(struct {
		Seq int64 `json:"seq"`
	}{e.Seq})
	err = s.rt.Client().Publish(ctx, &calf.Message{
		ID: conv + ".history." + strconv.FormatInt(e.Seq, 10), Channel: ConversationNoticeChannel, Key: conv, Data: data,
		Metadata: calf.Metadata{CorrelationID: conv},
	})
	return e, true, err
}

// readHistory returns the messages of the history of conv after the
// sequence number after.
func (s *Server) readHistory(ctx context.Context, conv string, after int64) ([]ConversationEntry, error) {
	rec, err := s.rt.Store().Get(ctx, KindConversationHistory, conv)
	if errors.Is(err, store.ErrNotFound) {
		return []ConversationEntry{}, nil
	}
	if err != nil {
		return nil, err
	}
	var h conversationHistory
	if err := json.Unmarshal(rec.Data, &h); err != nil {
		return nil, fmt.Errorf("server: the history of conversation %s: %w", conv, err)
	}
	out := []ConversationEntry{}
	for _, e := range h.Entries {
		if e.Seq > after {
			out = append(out, e)
		}
	}
	return out, nil
}

// conversationOf returns the conversation id when user may use it: the
// user who created it, or anybody on a server without tokens. One that
// does not exist and another user's get the same error.
func (s *Server) conversationOf(ctx context.Context, user, id string) (conversation.Conversation, error) {
	convs := s.conversations()
	if convs == nil {
		return conversation.Conversation{}, errNoConversations
	}
	missing := notFound(fmt.Sprintf("no conversation %q", id))
	if convid.CheckConversationID(id) != nil {
		return conversation.Conversation{}, missing
	}
	c, err := convs.Get(ctx, id)
	if errors.Is(err, conversation.ErrNotFound) {
		return conversation.Conversation{}, missing
	}
	if err != nil {
		return conversation.Conversation{}, err
	}
	if len(s.opts.Tokens) > 0 && c.UserID != user {
		return conversation.Conversation{}, missing
	}
	return c, nil
}

// conversationStopped is the error of a message to the stopped
// conversation id: 409 conversation_stopped.
func conversationStopped(id string) error {
	return &httperr.Error{Kind: httperr.ErrConflict, Code: "conversation_stopped", Message: fmt.Sprintf("conversation %s is stopped: it takes no more messages", id)}
}

// say sends the user's message text (and command) to the entry instance
// of the conversation id: recorded in its history first, so that the
// history has it before its answer, then published on the channel
// user → entry.
func (s *Server) say(ctx context.Context, user, id, text string, command []string) (ConversationEntry, error) {
	c, err := s.conversationOf(ctx, user, id)
	if err != nil {
		return ConversationEntry{}, err
	}
	switch {
	case strings.TrimSpace(text) == "" && len(command) == 0:
		return ConversationEntry{}, fmt.Errorf("%w: the message is empty", errBadRequest)
	case len(text) > MaxConversationText:
		return ConversationEntry{}, fmt.Errorf("%w: the message is over %d bytes", errBadRequest, MaxConversationText)
	case !utf8.ValidString(text):
		return ConversationEntry{}, fmt.Errorf("%w: the message is not UTF-8", errBadRequest)
	case len(command) > convid.MaxCommandArgs:
		return ConversationEntry{}, fmt.Errorf("%w: a command has at most %d words", errBadRequest, convid.MaxCommandArgs)
	}
	if c.Status != conversation.StatusRunning {
		return ConversationEntry{}, conversationStopped(c.ID)
	}
	ch, err := s.conversations().Route(ctx, c.ID, conversation.UserParticipant, c.Entry)
	if errors.Is(err, conversation.ErrStopped) {
		return ConversationEntry{}, conversationStopped(c.ID)
	}
	if err != nil {
		return ConversationEntry{}, err
	}
	msgID := calf.NewID()
	client := s.rt.Client()
	m := conversation.ConversationMessage{ConversationID: c.ID, UserID: user, Message: text, Command: command,
		Timestamp: client.Now().UTC(), CorrelationID: msgID}
	if err := m.Validate(); err != nil {
		return ConversationEntry{}, fmt.Errorf("%w: %v", errBadRequest, err)
	}
	e, _, err := s.appendHistory(ctx, c.ID, ConversationEntry{ID: msgID, From: conversation.UserParticipant, To: c.Entry,
		Message: text, Command: command, CorrelationID: msgID, Time: m.Timestamp}, false)
	if err != nil {
		return ConversationEntry{}, err
	}
	if _, err := client.Emit(ctx, ch, m, calf.WithID(msgID), calf.WithKey(c.ID), calf.WithMetadata(calf.Metadata{CorrelationID: msgID})); err != nil {
		return ConversationEntry{}, fmt.Errorf("server: send to conversation %s: %w", c.ID, err)
	}
	return e, nil
}

// conversationError reports err of a conversation endpoint: the errors of
// package conversation that the table of error answers cannot know (it
// sits below that package) take the edge's kinds first.
func (s *Server) conversationError(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, conversation.ErrInvalidID):
		err = &httperr.Error{Kind: errBadRequest, Message: err.Error()}
	case errors.Is(err, conversation.ErrExists):
		err = &httperr.Error{Kind: httperr.ErrConflict, Message: err.Error()}
	case errors.Is(err, conversation.ErrStopped):
		err = &httperr.Error{Kind: httperr.ErrConflict, Code: "conversation_stopped", Message: err.Error()}
	}
	s.requestError(w, r, err)
}

// createConversation serves POST /v1/conversations: a new conversation of
// the user, with its entry instance. The body, optional, may give a
// description: {"description": "…"}.
func (s *Server) createConversation(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Description string `json:"description"`
	}
	if r.ContentLength != 0 {
		if err := decodeBody(r, &req); err != nil {
			s.conversationError(w, r, err)
			return
		}
	}
	c, err := s.conversations().Create(r.Context(), conversation.NewConversation{UserID: userOf(r), Description: req.Description})
	if err != nil {
		s.conversationError(w, r, err)
		return
	}
	w.Header().Set("Location", "/v1/conversations/"+c.ID)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(c)
}

// listConversations serves GET /v1/conversations: the user's
// conversations, newest first (at most 100).
func (s *Server) listConversations(w http.ResponseWriter, r *http.Request) {
	all, err := s.conversations().List(r.Context(), "", 0)
	if err != nil {
		s.conversationError(w, r, err)
		return
	}
	user := userOf(r)
	mine := []conversation.Conversation{}
	for _, c := range all {
		if len(s.opts.Tokens) == 0 || c.UserID == user {
			mine = append(mine, c)
		}
	}
	slices.SortStableFunc(mine, func(a, b conversation.Conversation) int { return b.Created.Compare(a.Created) })
	writeJSON(w, struct {
		Conversations []conversation.Conversation `json:"conversations"`
	}{mine[:min(len(mine), maxConversationsListed)]})
}

// getConversation serves GET /v1/conversations/{id}: the conversation,
// its instances and topics, and its user-facing history (after ?after=).
func (s *Server) getConversation(w http.ResponseWriter, r *http.Request) {
	c, err := s.conversationOf(r.Context(), userOf(r), r.PathValue("id"))
	if err != nil {
		s.conversationError(w, r, err)
		return
	}
	var after int64
	if a := r.URL.Query().Get("after"); a != "" {
		if after, err = strconv.ParseInt(a, 10, 64); err != nil || after < 0 {
			s.conversationError(w, r, fmt.Errorf("%w: after %q is not a sequence number", errBadRequest, a))
			return
		}
	}
	v := conversationView{Conversation: c}
	convs := s.conversations()
	if v.Instances, err = convs.Instances(r.Context(), c.ID); err == nil {
		if v.Topics, err = convs.Topics(r.Context(), c.ID); err == nil {
			v.Messages, err = s.readHistory(r.Context(), c.ID, after)
		}
	}
	if err != nil {
		s.conversationError(w, r, err)
		return
	}
	writeJSON(w, v)
}

// postConversationMessage serves POST /v1/conversations/{id}/messages:
// the user's message {"message": "…", "command": [...]} sent to the
// entry instance; answered 202 with its entry in the history.
func (s *Server) postConversationMessage(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Message string   `json:"message"`
		Command []string `json:"command"`
	}
	if err := decodeBody(r, &req); err != nil {
		s.conversationError(w, r, err)
		return
	}
	e, err := s.say(r.Context(), userOf(r), r.PathValue("id"), req.Message, req.Command)
	if err != nil {
		s.conversationError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusAccepted)
	_ = json.NewEncoder(w).Encode(e)
}

// stopConversation serves POST /v1/conversations/{id}/stop: the
// conversation stopped (its runs in progress cancelled); answered with its
// record.
func (s *Server) stopConversation(w http.ResponseWriter, r *http.Request) {
	c, err := s.conversationOf(r.Context(), userOf(r), r.PathValue("id"))
	if err != nil {
		s.conversationError(w, r, err)
		return
	}
	if c, err = s.opts.Conversations.Stop(r.Context(), c.ID); err != nil {
		s.conversationError(w, r, err)
		return
	}
	writeJSON(w, c)
}

// restartInstance serves POST
// /v1/conversations/{id}/instances/{instance}/restart: a failed instance of
// the conversation put back to work (Host.Restart); answered with its
// record.
func (s *Server) restartInstance(w http.ResponseWriter, r *http.Request) {
	c, err := s.conversationOf(r.Context(), userOf(r), r.PathValue("id"))
	if err != nil {
		s.conversationError(w, r, err)
		return
	}
	in, err := s.opts.Conversations.Restart(r.Context(), c.ID, r.PathValue("instance"))
	if err != nil {
		s.conversationError(w, r, err)
		return
	}
	writeJSON(w, in)
}

// followConversation streams to the client the history of c after the
// sequence number after, then each message as it is recorded, and the
// events of the runs of c's entry instance (whose ids derive from the
// instance's) as they are logged, each run's from its first event, until
// the connection ends. A follow of the same conversation replaces the one
// before.
func (b *wsBridge) followConversation(ctx context.Context, c conversation.Conversation, after int64) {
	s := b.s
	fctx, cancel := context.WithCancel(ctx)
	key := "conversation " + c.ID
	b.mu.Lock()
	if old := b.follows[key]; old != nil {
		old()
	}
	b.follows[key] = cancel
	b.mu.Unlock()
	// Writes take the connection's context: a write whose context ends
	// closes the connection, and a follow replaced by another must not.
	emit := func(out wsOut) bool { return fctx.Err() == nil && b.send(ctx, out) == nil }
	fail := func(err error) {
		if fctx.Err() == nil {
			_ = b.send(ctx, wsOut{Type: "error", Conversation: c.ID, Message: err.Error()})
		}
		cancel()
	}
	client := s.rt.Client()
	// The notices are followed before the history is read, so that none
	// is missed between.
	hist, err := client.Follow(fctx, ConversationNoticeChannel, c.ID)
	if err != nil {
		fail(err)
		return
	}
	var runs *calf.Follower
	if s.opts.Log != nil {
		if runs, err = client.Follow(fctx, eventlog.NoticeChannel, c.Entry); err == nil {
			err = runs.AddTree(eventlog.NoticeChannel)
		}
		if err != nil {
			hist.Close()
			fail(err)
			return
		}
	}
	b.wg.Go(func() {
		defer hist.Close()
		for {
			entries, err := s.readHistory(fctx, c.ID, after)
			if err != nil {
				fail(err)
				return
			}
			for i := range entries {
				if !emit(wsOut{Type: "conversation_message", Conversation: c.ID, Entry: &entries[i]}) {
					return
				}
				after = entries[i].Seq
			}
			for {
				m, err := hist.Next(fctx)
				if err != nil {
					fail(err)
					return
				}
				var n struct {
					Seq int64 `json:"seq"`
				}
				if json.Unmarshal(m.Data, &n) == nil && n.Seq > after {
					break
				}
			}
		}
	})
	if runs == nil {
		return
	}
	b.wg.Go(func() {
		defer runs.Close()
		shown := map[string]int64{} // the last event sent, by log
		for {
			m, err := runs.Next(fctx)
			if err != nil {
				fail(err)
				return
			}
			log := m.Metadata.CorrelationID
			var n struct {
				Seq int64 `json:"seq"`
			}
			if json.Unmarshal(m.Data, &n) != nil || n.Seq <= shown[log] {
				continue
			}
			events, err := s.opts.Log.Read(fctx, log, shown[log], 0)
			if err != nil {
				fail(err)
				return
			}
			for i := range events {
				if !emit(wsOut{Type: "event", Conversation: c.ID, Run: log, Event: &events[i]}) {
					return
				}
				shown[log] = events[i].Seq
			}
		}
	})
}
