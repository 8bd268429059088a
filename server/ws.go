package server

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent/approval"
	"github.com/calf-go/calf/eventlog"
	"github.com/calf-go/calf/runner"
)

// WSProtocol is the WebSocket subprotocol of the bridge. A browser, which
// cannot set an Authorization header on a WebSocket, gives its token as a
// second subprotocol, "bearer." followed by the token.
const WSProtocol = "calf.v1"

// wsBearer reports whether r offers token as a "bearer.TOKEN" WebSocket
// subprotocol, compared in constant time.
func wsBearer(r *http.Request, token string) bool {
	want := []byte("bearer." + token)
	for _, v := range r.Header.Values("Sec-WebSocket-Protocol") {
		for _, p := range strings.Split(v, ",") {
			if subtle.ConstantTimeCompare([]byte(strings.TrimSpace(p)), want) == 1 {
				return true
			}
		}
	}
	return false
}

// wsIn is a message from a WebSocket client. Type says which:
//
//   - "run": start a run of Agent with Text in Session (made on first use);
//     the answer is "started" with the run's id, then the run's events;
//   - "follow": the events of Run after the sequence number After, for a
//     client that reconnects;
//   - "approve": answer the approval request Approval (Approve, Message,
//     Arguments to approve other arguments, ForSession);
//   - "cancel": cancel the run Run of Agent;
//   - "conversation": follow the conversation Conversation: its
//     user-facing history after the sequence number After, then each
//     message as it is recorded ("conversation_message"), and the events
//     of its entry instance's runs as they are logged ("event" with the
//     conversation);
//   - "say": send Text (and Command) to the conversation Conversation's
//     entry instance; answered by "sent" with its history entry.
//
// ID, when set, is echoed in the answer.
type wsIn struct {
	Type       string          `json:"type"`
	ID         string          `json:"id,omitempty"`
	Agent      string          `json:"agent,omitempty"`
	Session    string          `json:"session,omitempty"`
	Text       string          `json:"text,omitempty"`
	Run        string          `json:"run,omitempty"`
	After      int64           `json:"after,omitempty"`
	Approval   string          `json:"approval,omitempty"`
	Approve    bool            `json:"approve,omitempty"`
	Message    string          `json:"message,omitempty"`
	Arguments  json.RawMessage `json:"arguments,omitempty"`
	ForSession bool            `json:"for_session,omitempty"`
	// Conversation and Command, for "conversation" and "say".
	Conversation string   `json:"conversation,omitempty"`
	Command      []string `json:"command,omitempty"`
}

// wsOut is a message to a WebSocket client: "started", "event" (one event
// of a run's log; of a conversation's entry instance when Conversation is
// set), "end" (a run's events are over), "answered", "cancelled",
// "conversation_message" (a message of a conversation's user-facing
// history, in Entry), "sent" or "error".
type wsOut struct {
	Type         string             `json:"type"`
	ID           string             `json:"id,omitempty"`
	Run          string             `json:"run,omitempty"`
	Conversation string             `json:"conversation,omitempty"`
	Event        *eventlog.Event    `json:"event,omitempty"`
	Entry        *ConversationEntry `json:"entry,omitempty"`
	Message      string             `json:"message,omitempty"`
}

// ws serves GET /v1/ws: the WebSocket bridge, a participant on the broker
// that starts runs for the user, streams their events from the event log
// (resumable after a reconnection), and carries the user's approvals and
// cancellations. It holds no business logic of its own.
func (s *Server) ws(w http.ResponseWriter, r *http.Request) {
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{WSProtocol}, OriginPatterns: s.opts.AllowedOrigins})
	if err != nil {
		return // Accept answered: a foreign origin, or not a WebSocket request
	}
	defer c.CloseNow()
	if c.Subprotocol() != WSProtocol {
		c.Close(websocket.StatusPolicyViolation, "the subprotocol "+WSProtocol+" is required")
		return
	}
	c.SetReadLimit(s.opts.MaxMessageBytes)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	b := &wsBridge{s: s, c: c, user: userOf(r), follows: map[string]context.CancelFunc{}}
	defer b.wg.Wait()
	defer cancel()
	for {
		_, data, err := c.Read(ctx)
		if err != nil {
			return // closed, too big (closed with 1009), or the server stops
		}
		var in wsIn
		if err := json.Unmarshal(data, &in); err != nil {
			_ = b.send(ctx, wsOut{Type: "error", Message: "not a valid message: " + err.Error()})
			continue
		}
		if l := s.limiter(b.user); l != nil && !l.Allow() {
			_ = b.send(ctx, wsOut{Type: "error", ID: in.ID, Message: "too many messages: slow down"})
			continue
		}
		if err := b.handle(ctx, in); err != nil {
			msg := err.Error()
			if errors.Is(err, errNotYours) {
				msg = "no such session or run"
			}
			_ = b.send(ctx, wsOut{Type: "error", ID: in.ID, Run: in.Run, Conversation: in.Conversation, Message: strings.TrimPrefix(msg, "bad request: ")})
		}
	}
}

// wsBridge is one WebSocket connection's state.
type wsBridge struct {
	s    *Server
	c    *websocket.Conn
	user string

	writeMu sync.Mutex
	wg      sync.WaitGroup
	mu      sync.Mutex
	follows map[string]context.CancelFunc // runs followed, by id
}

func (b *wsBridge) send(ctx context.Context, out wsOut) error {
	b.writeMu.Lock()
	defer b.writeMu.Unlock()
	return wsjson.Write(ctx, b.c, out)
}

func (b *wsBridge) handle(ctx context.Context, in wsIn) error {
	s := b.s
	switch in.Type {
	case "run":
		rn, ok := s.runners[in.Agent]
		if !ok {
			return fmt.Errorf("%w: no agent %q", errBadRequest, in.Agent)
		}
		st, ok := rn.(runner.Submitter)
		if !ok {
			return fmt.Errorf("%w: %s starts no run without waiting for it: the web chat cannot run it", errBadRequest, in.Agent)
		}
		if strings.TrimSpace(in.Text) == "" {
			return fmt.Errorf("%w: the message is empty", errBadRequest)
		}
		if in.Session == "" {
			return fmt.Errorf("%w: a session is required", errBadRequest)
		}
		if err := s.claimSession(ctx, b.user, in.Session); err != nil {
			return err
		}
		opts := s.runOptions(b.user, runner.Options{RunID: calf.NewID(), SessionID: in.Session})
		if err := s.ownRun(ctx, b.user, opts.RunID); err != nil {
			return err
		}
		run, err := st.Submit(ctx, s.rt, in.Text, opts)
		if err != nil {
			return err
		}
		if err := b.send(ctx, wsOut{Type: "started", ID: in.ID, Run: run}); err != nil {
			return err
		}
		b.follow(ctx, run, 0, rn)
	case "follow":
		if err := s.findRun(ctx, b.user, in.Run); err != nil {
			return err
		}
		if in.After < 0 {
			return fmt.Errorf("%w: after %d", errBadRequest, in.After)
		}
		b.follow(ctx, in.Run, in.After, nil)
	case "approve":
		a, err := s.approvalOf(ctx, b.user, "approval", in.Approval)
		if err != nil {
			return err
		}
		if _, err := s.rt.Respond(ctx, a.ID, approval.Answer{
			Approve: in.Approve, Message: in.Message, Arguments: in.Arguments, Digest: a.Digest, ForSession: in.ForSession,
		}); err != nil {
			return fmt.Errorf("%w: %v", errBadRequest, err)
		}
		return b.send(ctx, wsOut{Type: "answered", ID: in.ID, Run: a.RunID})
	case "cancel":
		rn, ok := s.runners[in.Agent]
		if !ok {
			return fmt.Errorf("%w: no agent %q", errBadRequest, in.Agent)
		}
		if err := s.checkRun(ctx, b.user, in.Run); err != nil {
			return err
		}
		if err := rn.Cancel(ctx, s.rt, in.Run, "cancelled by "+b.user); err != nil {
			return err
		}
		return b.send(ctx, wsOut{Type: "cancelled", ID: in.ID, Run: in.Run})
	case "conversation":
		c, err := s.conversationOf(ctx, b.user, in.Conversation)
		if err != nil {
			return err
		}
		if in.After < 0 {
			return fmt.Errorf("%w: after %d", errBadRequest, in.After)
		}
		b.followConversation(ctx, c, in.After)
	case "say":
		e, err := s.say(ctx, b.user, in.Conversation, in.Text, in.Command)
		if err != nil {
			return err
		}
		return b.send(ctx, wsOut{Type: "sent", ID: in.ID, Conversation: in.Conversation, Entry: &e})
	default:
		return fmt.Errorf("%w: unknown message type %q (run, follow, approve, cancel, conversation, say)", errBadRequest, in.Type)
	}
	return nil
}

// follow streams the events of run after after, until the run's end or
// the connection's; a follow of the same run replaces the one before.
// started, when set, is the runner that just started run: a run no process
// takes up then ends the follow with an error (watchStart).
func (b *wsBridge) follow(ctx context.Context, run string, after int64, started runner.Runner) {
	fctx, cancel := context.WithCancel(ctx)
	b.mu.Lock()
	if old := b.follows[run]; old != nil {
		old()
	}
	b.follows[run] = cancel
	b.mu.Unlock()
	b.wg.Go(func() {
		defer cancel()
		wctx, seen := fctx, func(*calf.Message) {}
		if started != nil {
			var stop func()
			wctx, seen, stop = b.s.watchStart(fctx, started, run)
			defer stop()
		}
		for e, err := range b.s.opts.Log.FollowRun(wctx, run, after) {
			if err != nil {
				if nerr := b.s.notServedError(fctx, wctx, started, run); nerr != nil {
					err = nerr
				}
				if fctx.Err() == nil {
					_ = b.send(ctx, wsOut{Type: "error", Run: run, Message: err.Error()})
				}
				return
			}
			seen(e.Message)
			if b.send(fctx, wsOut{Type: "event", Run: run, Event: &e}) != nil {
				return
			}
		}
		_ = b.send(fctx, wsOut{Type: "end", Run: run})
	})
}
