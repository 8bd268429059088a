package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/tool"
)

// PermissionMode says which tool calls run without a person's approval.
type PermissionMode string

// The permission modes, from the strictest.
const (
	// PermissionAsk asks for every call (but those of Allowed tools).
	PermissionAsk PermissionMode = "ask"
	// PermissionAcceptReads runs read tools, and asks for the others.
	PermissionAcceptReads PermissionMode = "accept_reads"
	// PermissionAcceptEdits runs read and edit tools, and asks for
	// execute and network tools.
	PermissionAcceptEdits PermissionMode = "accept_edits"
	// PermissionBypass runs every call (but those of Disallowed tools).
	PermissionBypass PermissionMode = "bypass"
)

// Permissions decide which of an agent's tool calls run, which are
// refused, and which wait for a person's approval (see [Approval]). They
// apply after the pre_tool_use hooks, to the arguments those leave.
type Permissions struct {
	// Mode decides by the tool's kind ([tool.KindOf]). Default
	// [PermissionAsk].
	Mode PermissionMode `json:"mode,omitempty"`
	// Allowed tools run without asking, whatever the mode: names, or
	// path.Match patterns ("web_*"), several separated by "|".
	Allowed []string `json:"allowed,omitempty"`
	// Disallowed tools never run: the model is told the call was refused.
	// They win over Allowed and over every mode.
	Disallowed []string `json:"disallowed,omitempty"`
	// ApprovalTimeout, when positive, denies an approval request that no
	// one answered within it: [Runtime.ExpireApprovals] does, which
	// [Worker] calls periodically. Default: requests wait until answered.
	ApprovalTimeout time.Duration `json:"approval_timeout,omitempty"`
}

// PermissionDecision is what [Permissions.Decide] says of a call.
type PermissionDecision string

// The permission decisions.
const (
	PermissionAllow   PermissionDecision = "allow"
	PermissionDeny    PermissionDecision = "deny"
	PermissionAskUser PermissionDecision = "ask"
)

// Decide says whether a call of the tool name, of kind, runs, is refused,
// or asks for approval, and why.
func (p *Permissions) Decide(name string, kind tool.Kind) (PermissionDecision, string) {
	if matchAny(name, p.Disallowed...) {
		return PermissionDeny, fmt.Sprintf("the tool %s is not allowed", name)
	}
	if matchAny(name, p.Allowed...) {
		return PermissionAllow, ""
	}
	mode := p.Mode
	if mode == "" {
		mode = PermissionAsk
	}
	switch {
	case mode == PermissionBypass,
		mode == PermissionAcceptEdits && (kind == tool.KindRead || kind == tool.KindEdit),
		mode == PermissionAcceptReads && kind == tool.KindRead:
		return PermissionAllow, ""
	}
	return PermissionAskUser, fmt.Sprintf("permission mode %s asks before %s tools", mode, kind)
}

func (p *Permissions) validate() error {
	switch p.Mode {
	case "", PermissionAsk, PermissionAcceptReads, PermissionAcceptEdits, PermissionBypass:
	default:
		return fmt.Errorf("unknown permission mode %q", p.Mode)
	}
	for _, pat := range append(slices.Clone(p.Allowed), p.Disallowed...) {
		if err := checkPatterns(pat); err != nil {
			return fmt.Errorf("tool pattern %w", err)
		}
	}
	return nil
}

// matchAny reports whether name matches one of patterns: path.Match
// patterns, several in one string separated by "|".
func matchAny(name string, patterns ...string) bool {
	for _, pat := range patterns {
		for _, q := range strings.Split(pat, "|") {
			if ok, _ := path.Match(q, name); ok {
				return true
			}
		}
	}
	return false
}

// checkPatterns reports a malformed pattern of patterns (see matchAny).
func checkPatterns(patterns string) error {
	for _, q := range strings.Split(patterns, "|") {
		if _, err := path.Match(q, ""); err != nil {
			return fmt.Errorf("%q: %v", patterns, err)
		}
	}
	return nil
}

// ApprovalStatus is where an approval request stands.
type ApprovalStatus string

// The approval statuses.
const (
	ApprovalPending  ApprovalStatus = "pending"
	ApprovalApproved ApprovalStatus = "approved"
	ApprovalDenied   ApprovalStatus = "denied"
	// ApprovalCancelled: the request's run ended (cancelled, timed out,
	// failed) before anyone answered; [Approval.Message] says how. Such a
	// request cannot be answered: [Runtime.AnswerApproval] returns an
	// error matching [ErrRunEnded].
	ApprovalCancelled ApprovalStatus = "cancelled"
)

// KindApproval is the store kind of approval requests.
const KindApproval = "approval"

// Approval is a tool call that waits for a person's approval, and the
// answer once given. It is stored (kind [KindApproval], id
// "{run}/{tool_call_id}") and published on the agent's approval channel
// ([ApprovalChannel]) when requested and when answered. While it waits, the
// run holds no goroutine and no memory anywhere: only its stored state.
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
	// Digest binds an answer to what was shown: the hex SHA-256 of the
	// tool's name, a NUL byte and the arguments.
	Digest string `json:"digest"`
	// Reason says why the call asks.
	Reason string         `json:"reason"`
	Status ApprovalStatus `json:"status"`
	// Message is the answer's message: for a denial, what the model is
	// told.
	Message string `json:"message,omitempty"`
	// ApprovedArguments, when the approver edited them, are the arguments
	// the tool runs with.
	ApprovedArguments json.RawMessage `json:"approved_arguments,omitempty"`
	// Root, for a subagent's run, is the run a caller started: the request
	// and its answer are also published on that run's agent's approval
	// channel, so that its stream shows them.
	Root *RootRun `json:"root,omitempty"`
	// Hooks is what the pre_tool_use hooks decided before the call asked.
	Hooks       []HookRecord `json:"hooks,omitempty"`
	RequestedAt time.Time    `json:"requested_at"`
	// ExpiresAt, when set, is when the request is denied unanswered.
	ExpiresAt  time.Time `json:"expires_at,omitzero"`
	AnsweredAt time.Time `json:"answered_at,omitzero"`
}

// RootRun names the run a caller started, whose stream shows the approval
// requests of the subagent runs it leads to.
type RootRun struct {
	Agent         string `json:"agent"`
	RunID         string `json:"run_id"`
	CorrelationID string `json:"correlation_id,omitempty"`
}

// root returns the root of the runs st starts: its own root, or st, a run
// of agent.
func (st *runState) root(agent string) *RootRun {
	if st.Root != nil {
		return st.Root
	}
	return &RootRun{Agent: agent, RunID: st.RunID, CorrelationID: st.correlationID()}
}

// ApprovalChannel returns the channel of an agent's approval requests and
// answers.
func ApprovalChannel(agent string) string { return channelPrefix + agent + "." + suffixApproval }

const suffixApproval = "approval"

// ApprovalID returns the id of the approval request of a run's tool call.
func ApprovalID(run, toolCallID string) string { return run + "/" + toolCallID }

func approvalDigest(name string, args []byte) string {
	h := sha256.New()
	h.Write([]byte(name))
	h.Write([]byte{0})
	h.Write(args)
	return hex.EncodeToString(h.Sum(nil))
}

// Errors of [Runtime.AnswerApproval].
var (
	// ErrApprovalNotFound: no request has the id.
	ErrApprovalNotFound = errors.New("agent: no such approval request")
	// ErrApprovalAnswered: the request was answered already.
	ErrApprovalAnswered = errors.New("agent: the approval request was answered already")
	// ErrApprovalMismatch: the answer's digest is not the request's, so
	// the approver was not shown these arguments.
	ErrApprovalMismatch = errors.New("agent: the answer does not match the request's arguments")
	// ErrApprovalExpired: the request expired unanswered, and was denied.
	ErrApprovalExpired = errors.New("agent: the approval request expired")
)

// expiredMessage is what the model is told of a request that expired.
const expiredMessage = "no one answered the approval request in time"

// ApprovalAnswer is a person's answer to an approval request.
type ApprovalAnswer struct {
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
	// asking (Session.AllowedTools of package agent/session). It needs a run in a session.
	ForSession bool
}

// Approval returns the approval request id.
func (rt *Runtime) Approval(ctx context.Context, id string) (*Approval, error) {
	return GetApproval(ctx, rt.store, id)
}

// GetApproval returns the approval request id stored in s, or an error
// matching [ErrApprovalNotFound].
func GetApproval(ctx context.Context, s store.Store, id string) (*Approval, error) {
	rec, err := s.Get(ctx, KindApproval, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("%w: %s", ErrApprovalNotFound, id)
	}
	if err != nil {
		return nil, err
	}
	return decodeApproval(rec.Data)
}

// Approvals returns the approval requests of the run runID and of the
// runs it started (of every run when runID is empty) with the given status
// (any status when empty); see [ListApprovals].
func (rt *Runtime) Approvals(ctx context.Context, runID string, status ApprovalStatus) ([]Approval, error) {
	return ListApprovals(ctx, rt.store, runID, status)
}

// ListApprovals returns the approval requests stored in s of the run runID
// (of every run when runID is empty) with the given status (any status
// when empty), in the order of their ids. A request stored as pending
// whose run has ended (or is gone) is listed as [ApprovalCancelled], not
// pending: nothing would carry out its answer. The requests of the runs that
// runID started, at any depth, are the run's too: their ids extend its
// own, a subagent's as "{run}/{tool_call_id}", a handoff target's as
// "{run}.handoff.{n}", a team member's as "{run}.{step}.{member}". So the
// run a caller started, an agent's or a team's, is the one place to find
// every request its work is waiting for.
func ListApprovals(ctx context.Context, s store.Store, runID string, status ApprovalStatus) ([]Approval, error) {
	var out []Approval
	ended := map[string]string{} // by run: why its requests ended, "" while it runs
	for after := ""; ; {
		recs, err := s.List(ctx, KindApproval, runID, after, recoverPage)
		if err != nil {
			return nil, err
		}
		for _, rec := range recs {
			a, err := decodeApproval(rec.Data)
			if err != nil {
				return nil, err
			}
			if runID != "" && a.RunID != runID && !strings.HasPrefix(a.RunID, runID+"/") && !strings.HasPrefix(a.RunID, runID+".") {
				continue // a run whose id merely starts the same way
			}
			if a.Status == ApprovalPending {
				why, ok := ended[a.RunID]
				if !ok {
					if why, err = runEnded(ctx, s, a.RunID); err != nil {
						return nil, err
					}
					ended[a.RunID] = why
				}
				if why != "" {
					a.Status, a.Message = ApprovalCancelled, why
				}
			}
			if status == "" || a.Status == status {
				out = append(out, *a)
			}
		}
		if len(recs) < recoverPage {
			return out, nil
		}
		after = recs[len(recs)-1].ID
	}
}

// runEnded returns why the requests of the run id ended with it, or ""
// while the run goes on: a run that has ended, or whose record is gone
// (removed after it ended), answers no request.
func runEnded(ctx context.Context, s store.Store, id string) (string, error) {
	rec, err := s.Get(ctx, store.KindRun, id)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Sprintf("the run %s is gone", id), nil
	}
	if err != nil {
		return "", err
	}
	st, err := decodeRunState(rec.Data)
	if err != nil {
		return "", err
	}
	if !st.Status.Terminal() {
		return "", nil
	}
	why := fmt.Sprintf("the run %s ended (%s) before the request was answered", id, st.Status)
	if st.Error != "" {
		why += ": " + st.Error
	}
	return why, nil
}

func decodeApproval(data []byte) (*Approval, error) {
	var a Approval
	if err := json.Unmarshal(data, &a); err != nil || a.ID == "" {
		return nil, fmt.Errorf("%w: approval request: %v", ErrCorruptState, err)
	}
	return &a, nil
}

// AnswerApproval answers the approval request id, from any process that
// shares the agent's store and broker: it records the answer and publishes
// it, and a worker that serves the agent then runs the call with the
// approved arguments, or tells the model it was denied. A request answered
// already is refused with [ErrApprovalAnswered] (while its call still
// waits, its recorded answer is published again, so that retrying an
// answer whose publishing failed is safe; once the call has run, nothing
// is published); an unknown id with [ErrApprovalNotFound]; an answer whose
// Digest is not the request's with [ErrApprovalMismatch]; a request whose
// run has ended, which nothing would carry out, with an error matching
// [ErrRunEnded] (the request, if still stored as pending, is recorded
// [ApprovalCancelled]).
func (rt *Runtime) AnswerApproval(ctx context.Context, id string, ans ApprovalAnswer) (*Approval, error) {
	if ans.Approve && len(ans.Arguments) > 0 {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(ans.Arguments, &obj); err != nil || obj == nil {
			return nil, errors.New("agent: approved arguments must be a JSON object")
		}
	}
	req, err := rt.Approval(ctx, id)
	if err != nil {
		return nil, err
	}
	var ended string // why the run's requests ended, if they did
	if req.Status == ApprovalPending {
		if ended, err = runEnded(ctx, rt.store, req.RunID); err != nil {
			return nil, err
		}
	}
	if ans.ForSession && ans.Approve && ended == "" {
		a := req
		if a.SessionID == "" {
			return nil, fmt.Errorf("agent: approval request %s: its run is in no session, so the tool cannot be allowed for the session", id)
		}
		if a.Status == ApprovalPending && ans.Digest == a.Digest {
			if err := rt.setSessionTool(ctx, a.SessionID, a.ToolName, true); err != nil {
				return nil, err
			}
		}
	}
	var answered *Approval
	var already bool
	_, err = store.Update(ctx, rt.store, KindApproval, id, func(data []byte, exists bool) ([]byte, error) {
		answered, already = nil, false
		if !exists {
			return nil, fmt.Errorf("%w: %s", ErrApprovalNotFound, id)
		}
		a, err := decodeApproval(data)
		if err != nil {
			return nil, err
		}
		answered = a
		if a.Status != ApprovalPending {
			already = true
			return nil, nil
		}
		if ended != "" {
			a.Status, a.Message, a.AnsweredAt = ApprovalCancelled, ended, rt.now()
			return json.Marshal(a)
		}
		if !a.ExpiresAt.IsZero() && !rt.now().Before(a.ExpiresAt) {
			a.Status, a.Message, a.AnsweredAt = ApprovalDenied, expiredMessage, rt.now()
			return json.Marshal(a)
		}
		if ans.Digest != a.Digest {
			return nil, fmt.Errorf("%w: request %s", ErrApprovalMismatch, id)
		}
		a.Status, a.Message, a.AnsweredAt = ApprovalDenied, ans.Message, rt.now()
		if ans.Approve {
			a.Status = ApprovalApproved
			if len(ans.Arguments) > 0 {
				a.ApprovedArguments = ans.Arguments
			}
		}
		return json.Marshal(a)
	})
	if err != nil {
		return nil, err
	}
	if answered.Status == ApprovalCancelled {
		return answered, fmt.Errorf("%w: approval request %s cannot be answered: %s", ErrRunEnded, id, answered.Message)
	}
	republish := !already
	if already {
		// The answer is published again only while its call still waits
		// for it: publishing it again once the call has run would repeat
		// its result and the step after it in every stream of the run.
		acted, err := rt.answerActedOn(ctx, answered)
		if err != nil {
			return answered, err
		}
		republish = !acted
	}
	if republish {
		if err := rt.publishApproval(ctx, answered); err != nil {
			return answered, err
		}
	}
	switch {
	case already && answered.Message == expiredMessage:
		return answered, fmt.Errorf("%w: %s", ErrApprovalExpired, id)
	case already:
		return answered, fmt.Errorf("%w: %s was %s", ErrApprovalAnswered, id, answered.Status)
	case answered.Message == expiredMessage && answered.Status == ApprovalDenied:
		return answered, fmt.Errorf("%w: %s", ErrApprovalExpired, id)
	}
	return answered, nil
}

// answerActedOn reports whether the answer a has been carried out: the
// result of its call is recorded, or its run has moved past the call, has
// ended, or is gone.
func (rt *Runtime) answerActedOn(ctx context.Context, a *Approval) (bool, error) {
	rec, err := rt.store.Get(ctx, store.KindRun, a.RunID)
	if errors.Is(err, store.ErrNotFound) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	st, err := decodeRunState(rec.Data)
	if err != nil {
		return false, err
	}
	if st.Status.Terminal() || st.answered(a.Step, a.ToolCallID) {
		return true, nil
	}
	_, err = rt.store.Get(ctx, store.KindToolResult, a.RunID+"/"+a.ToolCallID)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// endApprovals records as [ApprovalCancelled] the pending approval
// requests of the run runID and of the runs it started whose runs have
// ended, so that they end with them.
func (rt *Runtime) endApprovals(ctx context.Context, runID string) error {
	reqs, err := rt.Approvals(ctx, runID, ApprovalCancelled)
	if err != nil {
		return err
	}
	for _, r := range reqs {
		_, err := store.Update(ctx, rt.store, KindApproval, r.ID, func(data []byte, exists bool) ([]byte, error) {
			if !exists {
				return nil, nil
			}
			a, err := decodeApproval(data)
			if err != nil || a.Status != ApprovalPending {
				return nil, err // answered meanwhile, or recorded already
			}
			a.Status, a.Message, a.AnsweredAt = ApprovalCancelled, r.Message, rt.now()
			return json.Marshal(a)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// ExpireApprovals denies the pending approval requests whose
// [Approval.ExpiresAt] has passed, publishing each denial as an answer
// would, and returns how many it denied. Several processes may call it at
// once: each request is denied once. [Worker] calls it every
// [WorkerOptions.ApprovalSweep].
func (rt *Runtime) ExpireApprovals(ctx context.Context) (int, error) {
	reqs, err := rt.Approvals(ctx, "", ApprovalPending)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, r := range reqs {
		if r.ExpiresAt.IsZero() || rt.now().Before(r.ExpiresAt) {
			continue
		}
		var expired *Approval
		_, err := store.Update(ctx, rt.store, KindApproval, r.ID, func(data []byte, exists bool) ([]byte, error) {
			expired = nil
			if !exists {
				return nil, nil
			}
			a, err := decodeApproval(data)
			if err != nil || a.Status != ApprovalPending {
				return nil, err
			}
			a.Status, a.Message, a.AnsweredAt = ApprovalDenied, expiredMessage, rt.now()
			expired = a
			return json.Marshal(a)
		})
		if err != nil {
			return n, err
		}
		if expired == nil {
			continue // answered meanwhile
		}
		if err := rt.publishApproval(ctx, expired); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// publishApproval publishes a's request or answer on its agent's approval
// channel.
func (rt *Runtime) publishApproval(ctx context.Context, a *Approval) error {
	what := "answer"
	if a.Status == ApprovalPending {
		what = "request"
	}
	// A copy for the stream of the run the caller started, first: the
	// answer lets the run go on, and what follows reaches that stream
	// under the same key, after the copy. The workers of that run's agent
	// ignore it; should it fail, the request still stands, and lists and
	// answers reach it.
	if a.Root != nil {
		if _, err := rt.client.Emit(ctx, ApprovalChannel(a.Root.Agent), a, calf.WithID(a.RunID+".approval."+a.ToolCallID+"."+what+".root"),
			calf.WithKey(a.Root.RunID), calf.WithMetadata(calf.Metadata{CorrelationID: a.Root.CorrelationID, RunID: a.Root.RunID})); err != nil {
			rt.log.Warn("agent: approval request not shown in the stream of its root run", "id", a.ID, "root", a.Root.RunID, "err", err)
		}
	}
	return rt.emitApproval(ctx, a)
}

// emitApproval publishes a's request or answer on its agent's approval
// channel, without the copy for the root run's stream.
func (rt *Runtime) emitApproval(ctx context.Context, a *Approval) error {
	what := "answer"
	if a.Status == ApprovalPending {
		what = "request"
	}
	_, err := rt.client.Emit(ctx, ApprovalChannel(a.Agent), a, calf.WithID(a.RunID+".approval."+a.ToolCallID+"."+what),
		calf.WithKey(a.RunID), calf.WithMetadata(calf.Metadata{CorrelationID: a.CorrelationID, RunID: a.RunID, SessionID: a.SessionID}))
	return err
}

// RevokeSessionTool takes back the permission, given with
// [ApprovalAnswer.ForSession], to call the tool name in the session id
// without asking. Revoking what was not allowed does nothing.
func (rt *Runtime) RevokeSessionTool(ctx context.Context, id, name string) error {
	return rt.setSessionTool(ctx, id, name, false)
}

// setSessionTool adds the tool name to the session's allowed tools, or
// removes it.
func (rt *Runtime) setSessionTool(ctx context.Context, id, name string, allow bool) error {
	return rt.sessions.SetToolAllowed(ctx, id, name, allow)
}

// sessionAllows reports whether the session id allows the tool name
// without asking.
func (rt *Runtime) sessionAllows(ctx context.Context, id, name string) (bool, error) {
	return rt.sessions.Allows(ctx, id, name)
}
