package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/agent/approval"
	"github.com/calf-go/calf/agent/session"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/store"
)

// maxSessionsListed bounds GET /v1/sessions.
const maxSessionsListed = 100

// maxSessionTurns bounds the turns GET /v1/sessions/{id} describes: those
// of the session's last runs.
const maxSessionTurns = 100

// owns reports whether user may read the session id: the session's owner,
// or anybody on a server without tokens.
func (s *Server) owns(r *http.Request, user, id string) (bool, error) {
	if len(s.opts.Tokens) == 0 {
		return true, nil
	}
	rec, err := s.rt.Store().Get(r.Context(), KindSessionOwner, id)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	var o owner
	if err := json.Unmarshal(rec.Data, &o); err != nil {
		return false, err
	}
	return o.User == user, nil
}

// sessions serves GET /v1/sessions: the user's sessions, newest first (at
// most 100).
func (s *Server) sessions(w http.ResponseWriter, r *http.Request) {
	user := userOf(r)
	out := struct {
		Sessions []session.Info `json:"sessions"`
	}{Sessions: []session.Info{}}
	after := ""
	for len(out.Sessions) < maxSessionsListed {
		page, err := session.List(r.Context(), s.rt.Store(), &session.ListOptions{Limit: 200, After: after})
		if err != nil {
			s.requestError(w, r, err)
			return
		}
		for _, info := range page.Sessions {
			ok, err := s.owns(r, user, info.ID)
			if err != nil {
				s.requestError(w, r, err)
				return
			}
			if ok && len(out.Sessions) < maxSessionsListed {
				out.Sessions = append(out.Sessions, info)
			}
		}
		if page.Next == "" {
			break
		}
		after = page.Next
	}
	writeJSON(w, out)
}

// sessionView is what GET /v1/sessions/{id} answers: the session, with
// its messages, and its last runs as turns.
type sessionView struct {
	*session.Session
	// Turns are the session's last runs that ended (at most 100), oldest
	// first, that its messages end with: the messages before the first
	// turn's are older runs', whose records are gone (removed by the
	// retention sweep), or were stored otherwise (saved, imported).
	Turns []sessionTurn `json:"turns"`
}

// sessionTurn is a run of a session, as its record keeps it: what a page
// shows of an answer besides its messages.
type sessionTurn struct {
	Run    string          `json:"run"`
	Agent  string          `json:"agent"`
	Status agent.RunStatus `json:"status"`
	// First and Count locate the messages the run added to the session's:
	// messages[first:first+count]. A run that did not complete adds none;
	// Messages then holds those its record keeps of its own: its prompt,
	// and the tool calls it made before it ended.
	First    int             `json:"first"`
	Count    int             `json:"count"`
	Messages []model.Message `json:"messages,omitempty"`
	// Output is the run's output (a JSON string for a text agent), Error
	// why it failed or was cancelled.
	Output json.RawMessage `json:"output,omitempty"`
	Error  string          `json:"error,omitempty"`
	// Usage and Cost are what the run's output reports: its model calls,
	// its subagents' and, after a handoff, those of the runs before it.
	Usage model.Usage `json:"usage"`
	Cost  model.Cost  `json:"cost"`
	// Approvals are the approval requests of the run and of the runs it
	// started, with their answers.
	Approvals []approval.Approval `json:"approvals,omitempty"`
}

// sessionTurns returns the turns of the last runs of sess that ended, the
// latest back to the first whose record is missing or whose messages do
// not fit the session's.
func (s *Server) sessionTurns(ctx context.Context, sess *session.Session) ([]sessionTurn, error) {
	turns := []sessionTurn{}
	end := len(sess.Messages)
	runs := sess.Runs[max(0, len(sess.Runs)-maxSessionTurns):]
	for i := len(runs) - 1; i >= 0; i-- {
		st, err := agentRun(ctx, s.rt.Store(), runs[i])
		if errors.Is(err, store.ErrNotFound) || errors.Is(err, agent.ErrCorruptState) {
			break // removed, or a team's or workflow's run: the older messages are shown as they are
		}
		if err != nil {
			return nil, err
		}
		own, n := ownMessages(st)
		t := sessionTurn{Run: st.ID, Agent: st.Agent, Status: st.Status, Output: st.Output, Error: st.Error, Usage: st.Usage, Cost: st.Cost}
		if st.Inherited != nil {
			t.Usage, t.Cost = t.Usage.Add(st.Inherited.Usage), t.Cost.Add(st.Inherited.Cost)
		}
		if st.Status == agent.RunComplete || st.Status == agent.RunHandedOff {
			t.Count = n
		} else {
			t.Messages = own
		}
		if t.Count > end {
			break // the session's messages were replaced since
		}
		end -= t.Count
		t.First = end
		if t.Approvals, err = approval.List(ctx, s.rt.Store(), st.ID, ""); err != nil {
			return nil, err
		}
		turns = append(turns, t)
	}
	slices.Reverse(turns)
	return turns, nil
}

// ownMessages returns the messages of the run st, as its record holds
// them, that are its own (not its session's history), and how many it
// has, with those its record keeps apart.
func ownMessages(st *agent.RunInfo) ([]model.Message, int) {
	return st.NewMessages(), st.Own
}

// session serves GET /v1/sessions/{id}: a session of the user, with its
// messages and its turns.
func (s *Server) session(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	ok, err := s.owns(r, userOf(r), id)
	if err != nil {
		s.requestError(w, r, err)
		return
	}
	if !ok {
		s.requestError(w, r, errNotYours)
		return
	}
	sess, err := session.Load(r.Context(), s.rt.Store(), id)
	if errors.Is(err, store.ErrNotFound) {
		s.requestError(w, r, errNotYours)
		return
	}
	if err != nil {
		s.requestError(w, r, err)
		return
	}
	turns, err := s.sessionTurns(r.Context(), sess)
	if err != nil {
		s.requestError(w, r, err)
		return
	}
	writeJSON(w, sessionView{Session: sess, Turns: turns})
}

// agentRun returns the view of the agent run id made from its record
// alone, or an error matching store.ErrNotFound when st has no agent run
// id.
func agentRun(ctx context.Context, st store.Store, id string) (*agent.RunInfo, error) {
	rec, err := st.Get(ctx, store.KindRun, id)
	if err != nil {
		return nil, err
	}
	return agent.DecodeRunInfo(rec.Data)
}
