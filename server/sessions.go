package server

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/store"
)

// maxSessionsListed bounds GET /v1/sessions.
const maxSessionsListed = 100

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
		Sessions []agent.SessionInfo `json:"sessions"`
	}{Sessions: []agent.SessionInfo{}}
	after := ""
	for len(out.Sessions) < maxSessionsListed {
		page, err := s.rt.Sessions(r.Context(), &agent.SessionListOptions{Limit: 200, After: after})
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

// session serves GET /v1/sessions/{id}: a session of the user, with its
// messages.
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
	sess, err := s.rt.LoadSession(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		s.requestError(w, r, errNotYours)
		return
	}
	if err != nil {
		s.requestError(w, r, err)
		return
	}
	writeJSON(w, sess)
}
