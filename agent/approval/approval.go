package approval

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent/internal/runprogress"
	"github.com/calf-go/calf/internal/signals"
	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/tool"
)

// Kind is the store kind of approval requests.
const Kind = "approval"

// KindAnswered indexed, under the request's id, the answers recorded
// without a client that reached other processes, for a runtime on an
// in-process broker to carry out. Answers are now signals of their runs
// (see [Respond]), which have an index of their own; entries left by
// earlier versions are swept with their runs.
const KindAnswered = "approval_answered"

// unheard reports whether what c publishes may not reach the process
// whose run waits: no client, or one on an in-process broker
// ([calf.IsLocal]), which reaches this process only.
func unheard(c *calf.Client) bool { return c == nil || calf.IsLocal(c.Broker()) }

// EventID returns the id of the message that carries a on its agent's
// approval channel: one for the request, one for its answer, so that the
// same answer sent twice (by [Respond] retried, or by a redelivery) is
// one event in a stream, and is carried out once.
func EventID(a *Approval) string {
	what := "answer"
	if a.Status == Pending {
		what = "request"
	}
	return a.RunID + ".approval." + a.ToolCallID + "." + what
}

// carryOut sends the answer a to its run as the signal that its request
// waits for ([signals.Answer]): the run is woken by an event on its
// agent's approval channel that is the answer itself, as [Publish] sends
// it, and that its agent's workers carry out. A request whose run waits
// in no such way (recorded by an earlier version) has its answer
// published with c instead. On an in-process broker, or with a nil c,
// the signal is indexed for the process that serves the run, which may
// be another on the same store (see [Respond]). A copy for the stream of
// the root run goes first (see [Publish]).
func carryOut(ctx context.Context, s store.Store, c *calf.Client, a *Approval) error {
	now := time.Now
	if c != nil {
		now = c.Now
		publishRoot(ctx, c, a)
	}
	value, err := json.Marshal(a)
	if err != nil {
		return err
	}
	env := signals.Env{Store: s, Client: c, Now: now, Local: unheard(c)}
	seq := fmt.Sprintf("%019d-00000000", max(a.AnsweredAt.UnixNano(), 0))
	woke, err := signals.Answer(ctx, env, signals.Key("agent", a.Agent, a.RunID), signals.ApprovalName(a.ToolCallID), seq, value)
	if err != nil {
		return fmt.Errorf("approval: send the answer of %s to its run: %w", a.ID, err)
	}
	if woke || c == nil {
		return nil
	}
	return publishOwn(ctx, c, a)
}

// Status is where an approval request stands.
type Status string

// The statuses of a request.
const (
	Pending  Status = "pending"
	Approved Status = "approved"
	Denied   Status = "denied"
	// Cancelled: the request's run ended (cancelled, timed out, failed)
	// before anyone answered; [Approval.Message] says how. Such a request
	// cannot be answered: [Respond] returns an error matching
	// [ErrRunEnded].
	Cancelled Status = "cancelled"
)

// Approval is a tool call that waits for a person's approval, and the
// answer once given. It is stored (kind [Kind], id [ID]) and published on
// the agent's approval channel ([Channel]) when requested and when
// answered. While it waits, the run holds no goroutine and no memory
// anywhere: only its stored state.
type Approval struct {
	ID        string `json:"id"`
	Agent     string `json:"agent"`
	RunID     string `json:"run_id"`
	SessionID string `json:"session_id,omitempty"`
	// CorrelationID is the correlation id of the run's events, which the
	// request and the answer carry so that the run's followers see them.
	CorrelationID string    `json:"correlation_id,omitempty"`
	Step          int       `json:"step"`
	ToolCallID    string    `json:"tool_call_id"`
	ToolName      string    `json:"tool_name"`
	ToolKind      tool.Kind `json:"tool_kind"`
	// Arguments are the call's arguments as the approver is shown them.
	Arguments json.RawMessage `json:"arguments"`
	// Digest binds an answer to what was shown: [Digest] of the tool's
	// name and the arguments.
	Digest string `json:"digest"`
	// Reason says why the call asks.
	Reason string `json:"reason"`
	Status Status `json:"status"`
	// Message is the answer's message: for a denial, what the model is
	// told.
	Message string `json:"message,omitempty"`
	// ApprovedArguments, when the approver edited them, are the arguments
	// the tool runs with.
	ApprovedArguments json.RawMessage `json:"approved_arguments,omitempty"`
	// Root, for a subagent's run, is the run a caller started: the request
	// and its answer are also published on that run's agent's approval
	// channel, so that its stream shows them.
	Root *Root `json:"root,omitempty"`
	// Hooks is what the pre_tool_use hooks decided before the call asked.
	Hooks       []HookDecision `json:"hooks,omitempty"`
	RequestedAt time.Time      `json:"requested_at"`
	// ExpiresAt, when set, is when the request is denied unanswered.
	ExpiresAt  time.Time `json:"expires_at,omitzero"`
	AnsweredAt time.Time `json:"answered_at,omitzero"`
	// ForSession, on an approval, also allows the tool for the rest of
	// the run's session ([Answer.ForSession]): the worker that carries out
	// the answer records it in the session.
	ForSession bool `json:"for_session,omitempty"`
}

// Root names the run a caller started, whose stream shows the approval
// requests of the subagent runs it leads to.
type Root struct {
	Agent         string `json:"agent"`
	RunID         string `json:"run_id"`
	CorrelationID string `json:"correlation_id,omitempty"`
}

// HookDecision is what one of the agent's hooks decided about the call
// before it asked (the agent's HookRecord).
type HookDecision struct {
	Hook   string `json:"hook"`
	Event  string `json:"event"`
	Action string `json:"action"`
	Reason string `json:"reason,omitempty"`
	// Arguments, for a transform, are the arguments the hook gave.
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// Answer is a person's answer to an approval request.
type Answer struct {
	// Approve runs the call; false denies it.
	Approve bool
	// Message is told to the model with a denial, and kept with the
	// answer.
	Message string
	// Arguments, when set, approve the call with these arguments (a JSON
	// object) instead of the ones shown.
	Arguments json.RawMessage
	// Digest is the [Approval.Digest] of the request as the approver saw
	// it: an answer for other arguments is refused.
	Digest string
	// ForSession, with Approve, also allows the tool for the rest of the
	// run's session: its later calls in the session's runs run without
	// asking (the session's allowed tools, which the agent's runtime can
	// revoke). It needs a run in a session.
	ForSession bool
}

// Errors of [Get], [List] and [Respond].
var (
	// ErrNotFound: no request has the id. It also matches
	// [store.ErrNotFound].
	ErrNotFound = store.NotFound("approval: no such approval request")
	// ErrAnswered: the request was answered already.
	ErrAnswered = errors.New("approval: the approval request was answered already")
	// ErrMismatch: the answer's digest is not the request's, so the
	// approver was not shown these arguments.
	ErrMismatch = errors.New("approval: the answer does not match the request's arguments")
	// ErrExpired: the request expired unanswered, and was denied.
	ErrExpired = errors.New("approval: the approval request expired")
	// ErrRunEnded: the request's run has ended, and nothing would carry
	// out an answer.
	ErrRunEnded = errors.New("approval: the request's run has ended")
)

// expiredMessage is the [Approval.Message] of a request denied because no
// one answered it in time: what the model is told.
const expiredMessage = "no one answered the approval request in time"

// ID returns the id of the approval request of a run's tool call.
func ID(run, toolCallID string) string { return run + "/" + toolCallID }

// Channel returns the channel of an agent's approval requests and answers.
func Channel(agent string) string { return "calf.agent." + agent + ".approval" }

// Digest returns the digest that binds an answer to the call it was shown:
// the hex SHA-256 of the tool's name, a NUL byte and the arguments.
func Digest(toolName string, args []byte) string {
	h := sha256.New()
	h.Write([]byte(toolName))
	h.Write([]byte{0})
	h.Write(args)
	return hex.EncodeToString(h.Sum(nil))
}

// page is how many records a listing reads at a time.
const page = 256

// Get returns the approval request id stored in s, or an error matching
// [ErrNotFound].
func Get(ctx context.Context, s store.Store, id string) (*Approval, error) {
	rec, err := s.Get(ctx, Kind, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if err != nil {
		return nil, err
	}
	return Decode(rec.Data)
}

// Decode decodes a stored approval request, or the payload of a message
// on an approval channel.
func Decode(data []byte) (*Approval, error) {
	var a Approval
	if err := json.Unmarshal(data, &a); err != nil || a.ID == "" {
		return nil, fmt.Errorf("approval: corrupt approval request: %v", err)
	}
	return &a, nil
}

// List returns the approval requests stored in s of the run runID (of
// every run when runID is empty) with the given status (any status when
// empty), in the order of their ids. A request stored as pending whose
// run has ended (or is gone) is listed as [Cancelled], not pending:
// nothing would carry out its answer. The requests of the runs that runID
// started, at any depth, are the run's too: their ids extend its own, a
// subagent's as "{run}/{tool_call_id}", a handoff target's as
// "{run}.handoff.{n}", a team member's as "{run}.{step}.{member}". So the
// run a caller started, an agent's or a team's, is the one place to find
// every request its work is waiting for.
func List(ctx context.Context, s store.Store, runID string, status Status) ([]Approval, error) {
	var out []Approval
	ended := map[string]string{} // by run: why its requests ended, "" while it runs
	for after := ""; ; {
		recs, err := s.List(ctx, Kind, runID, after, page)
		if err != nil {
			return nil, err
		}
		for _, rec := range recs {
			a, err := Decode(rec.Data)
			if err != nil {
				return nil, err
			}
			if runID != "" && a.RunID != runID && !strings.HasPrefix(a.RunID, runID+"/") && !strings.HasPrefix(a.RunID, runID+".") {
				continue // a run whose id merely starts the same way
			}
			if a.Status == Pending {
				why, ok := ended[a.RunID]
				if !ok {
					if why, err = runEnded(ctx, s, a.RunID); err != nil {
						return nil, err
					}
					ended[a.RunID] = why
				}
				if why != "" {
					a.Status, a.Message = Cancelled, why
				}
			}
			if status == "" || a.Status == status {
				out = append(out, *a)
			}
		}
		if len(recs) < page {
			return out, nil
		}
		after = recs[len(recs)-1].ID
	}
}

// runEnded returns why the requests of the run id ended with it, or ""
// while the run goes on: a run that has ended, or whose record is gone
// (removed after it ended), answers no request.
func runEnded(ctx context.Context, s store.Store, id string) (string, error) {
	p, err := runprogress.Read(ctx, s, id)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Sprintf("the run %s is gone", id), nil
	}
	if err != nil {
		return "", err
	}
	if !p.Ended() {
		return "", nil
	}
	why := fmt.Sprintf("the run %s ended (%s) before the request was answered", id, p.Status)
	if p.Error != "" {
		why += ": " + p.Error
	}
	return why, nil
}

// Respond answers the approval request id stored in s, from any process
// that shares the agent's store: it records the answer and publishes it
// with c, and a worker that serves the agent then runs the call with the
// approved arguments, or tells the model it was denied.
//
// The answer is a signal of the request's run, the one its call waits
// for: sending it wakes the run with the answer (see [Publish]). With a
// nil c, or a c on an in-process broker, which reaches no other process,
// the signal is only recorded, and indexed. That is enough for a run
// served on an in-process broker ([calf.IsLocal]): its runtime reads that
// index about once a second, and wakes the run itself. Workers on a
// broker other processes reach need the answer published: give c a
// client of that broker.
//
// A request answered already is refused with [ErrAnswered] (while its
// call still waits, its recorded answer is published again, so that
// retrying an answer whose publishing failed is safe; once the call has
// run, nothing is published); an unknown id with [ErrNotFound]; an answer
// whose Digest is not the request's with [ErrMismatch]; a request past its
// [Approval.ExpiresAt] is denied, with [ErrExpired]; a request whose run
// has ended, which nothing would carry out, with an error matching
// [ErrRunEnded] (the request, if still stored as pending, is recorded
// [Cancelled]). The returned request is the one stored, also with those
// errors. The time of the answer is c's clock, or the machine's with a nil
// c.
func Respond(ctx context.Context, s store.Store, c *calf.Client, id string, ans Answer) (*Approval, error) {
	if ans.Approve && len(ans.Arguments) > 0 {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(ans.Arguments, &obj); err != nil || obj == nil {
			return nil, errors.New("approval: approved arguments must be a JSON object")
		}
	}
	now := time.Now
	if c != nil {
		now = c.Now
	}
	req, err := Get(ctx, s, id)
	if err != nil {
		return nil, err
	}
	var ended string // why the run's requests ended, if they did
	if req.Status == Pending {
		if ended, err = runEnded(ctx, s, req.RunID); err != nil {
			return nil, err
		}
	}
	if ans.ForSession && ans.Approve && ended == "" && req.SessionID == "" {
		return nil, fmt.Errorf("approval: request %s: its run is in no session, so the tool cannot be allowed for the session", id)
	}
	var answered *Approval
	var already bool
	_, err = store.Update(ctx, s, Kind, id, func(data []byte, exists bool) ([]byte, error) {
		answered, already = nil, false
		if !exists {
			return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
		}
		a, err := Decode(data)
		if err != nil {
			return nil, err
		}
		answered = a
		if a.Status != Pending {
			already = true
			return nil, nil
		}
		t := now()
		if ended != "" {
			a.Status, a.Message, a.AnsweredAt = Cancelled, ended, t
			return json.Marshal(a)
		}
		if !a.ExpiresAt.IsZero() && !t.Before(a.ExpiresAt) {
			a.Status, a.Message, a.AnsweredAt = Denied, expiredMessage, t
			return json.Marshal(a)
		}
		if ans.Digest != a.Digest {
			return nil, fmt.Errorf("%w: request %s", ErrMismatch, id)
		}
		a.Status, a.Message, a.AnsweredAt = Denied, ans.Message, t
		if ans.Approve {
			a.Status, a.ForSession = Approved, ans.ForSession
			if len(ans.Arguments) > 0 {
				a.ApprovedArguments = ans.Arguments
			}
		}
		return json.Marshal(a)
	})
	if err != nil {
		return nil, err
	}
	if answered.Status == Cancelled {
		return answered, fmt.Errorf("%w: approval request %s cannot be answered: %s", ErrRunEnded, id, answered.Message)
	}
	send := !already
	if already {
		// The answer is sent again only while its call still waits for
		// it: sending it again once the call has run would repeat its
		// result and the step after it in every stream of the run.
		acted, err := actedOn(ctx, s, answered)
		if err != nil {
			return answered, err
		}
		send = !acted
	}
	if send {
		if err := carryOut(ctx, s, c, answered); err != nil {
			return answered, err
		}
	}
	switch {
	case already && answered.Message == expiredMessage:
		return answered, fmt.Errorf("%w: %s", ErrExpired, id)
	case already:
		return answered, fmt.Errorf("%w: %s was %s", ErrAnswered, id, answered.Status)
	case answered.Message == expiredMessage && answered.Status == Denied:
		return answered, fmt.Errorf("%w: %s", ErrExpired, id)
	}
	return answered, nil
}

// actedOn reports whether the answer a has been carried out: the result
// of its call is recorded, or its run has moved past the call, has ended,
// or is gone.
func actedOn(ctx context.Context, s store.Store, a *Approval) (bool, error) {
	p, err := runprogress.Read(ctx, s, a.RunID)
	if errors.Is(err, store.ErrNotFound) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	if p.Ended() || p.Answered(a.Step, a.ToolCallID) {
		return true, nil
	}
	_, err = s.Get(ctx, store.KindToolResult, a.RunID+"/"+a.ToolCallID)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// Expire denies the pending approval requests stored in s whose
// [Approval.ExpiresAt] has passed by c's clock, publishing each denial
// with c as [Respond] would (with a nil c, by the machine's clock, and
// recording only), and returns how many it denied. Several processes may
// call it at once: each request is denied once. It lists every request:
// the agent's runtime denies each request when it expires, through a
// durable timer started with it ([ExpireRequest]); Expire is the sweep
// for the requests recorded without one (by versions before the timers),
// which [agent.Worker] runs when it starts.
func Expire(ctx context.Context, s store.Store, c *calf.Client) (int, error) {
	reqs, err := List(ctx, s, "", Pending)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, r := range reqs {
		expired, err := ExpireRequest(ctx, s, c, r.ID)
		if err != nil {
			return n, err
		}
		if expired {
			n++
		}
	}
	return n, nil
}

// ExpireRequest denies the approval request id stored in s if it is
// pending and its [Approval.ExpiresAt] has passed by c's clock,
// publishing the denial with c as [Respond] would (with a nil c, by the
// machine's clock, and recording only), and reports whether it denied
// it. A request answered, unknown, or not expired is left alone. Several
// processes may call it at once: the request is denied once. A request
// denied for its expiry before, whose call still waits (its denial's
// publishing failed), has its denial published again.
func ExpireRequest(ctx context.Context, s store.Store, c *calf.Client, id string) (bool, error) {
	now := time.Now
	if c != nil {
		now = c.Now
	}
	var cur, expired *Approval
	_, err := store.Update(ctx, s, Kind, id, func(data []byte, exists bool) ([]byte, error) {
		cur, expired = nil, nil
		if !exists {
			return nil, nil
		}
		a, err := Decode(data)
		cur = a
		if err != nil || a.Status != Pending || a.ExpiresAt.IsZero() || now().Before(a.ExpiresAt) {
			return nil, err
		}
		a.Status, a.Message, a.AnsweredAt = Denied, expiredMessage, now()
		expired = a
		return json.Marshal(a)
	})
	if err != nil {
		return false, err
	}
	if expired == nil {
		if cur == nil || cur.Status != Denied || cur.Message != expiredMessage {
			return false, nil
		}
		acted, err := actedOn(ctx, s, cur)
		if err != nil || acted {
			return false, err
		}
		return false, carryOut(ctx, s, c, cur)
	}
	return true, carryOut(ctx, s, c, expired)
}

// Publish publishes the request or answer a with c: on its agent's
// approval channel ([Channel]), where the agent's workers carry out an
// answer, and, for a subagent's run, a copy on the approval channel of its
// root run's agent ([Approval.Root]), for that run's stream. An answer
// that [Respond] or [Expire] records is sent as a signal of its run,
// whose wake is this same message; Publish serves for requests, and for
// an answer whose run does not wait for the signal (a request recorded by
// an earlier version). The messages' ids ([EventID]) derive from the
// request's id and its status (request or answer), so that publishing
// the same answer twice is carried out once.
//
// The copy goes first: the answer lets the run go on, and what follows
// reaches the root run's stream under the same key, after the copy. The
// workers of the root run's agent ignore it. Should it fail (the root
// run's agent may have no approval channel on a broker whose channels are
// created), the request still stands, and listings and answers reach it:
// the failure is logged with c's logger, and the error returned is the
// other message's.
func Publish(ctx context.Context, c *calf.Client, a *Approval) error {
	publishRoot(ctx, c, a)
	return publishOwn(ctx, c, a)
}

// publishRoot publishes the copy of a for the stream of its root run, if
// a is a subagent's, logging a failure.
func publishRoot(ctx context.Context, c *calf.Client, a *Approval) {
	if a.Root == nil {
		return
	}
	if _, err := c.Emit(ctx, Channel(a.Root.Agent), a, calf.WithID(EventID(a)+".root"),
		calf.WithKey(a.Root.RunID), calf.WithMetadata(calf.Metadata{CorrelationID: a.Root.CorrelationID, RunID: a.Root.RunID})); err != nil {
		c.Logger().Warn("approval: request not shown in the stream of its root run", "id", a.ID, "root", a.Root.RunID, "err", err)
	}
}

// publishOwn publishes a on its agent's approval channel.
func publishOwn(ctx context.Context, c *calf.Client, a *Approval) error {
	_, err := c.Emit(ctx, Channel(a.Agent), a, calf.WithID(EventID(a)),
		calf.WithKey(a.RunID), calf.WithMetadata(Metadata(a)))
	return err
}

// Metadata returns the metadata of the messages that carry a on its
// agent's approval channel.
func Metadata(a *Approval) calf.Metadata {
	return calf.Metadata{CorrelationID: a.CorrelationID, RunID: a.RunID, SessionID: a.SessionID}
}
