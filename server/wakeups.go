package server

import (
	"fmt"
	"net/http"
	"slices"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/runner"
)

// wakeUpsOf returns the follow-ups pending in the session id of user
// ([agent.WakeUps]): those the server's agents scheduled in it, the
// earliest due first. Another user's session, and a bad id, get the
// errors of a session that does not exist.
func (s *Server) wakeUpsOf(r *http.Request, user, id string) ([]agent.WakeUp, error) {
	if !sessionID.MatchString(id) {
		return nil, fmt.Errorf("%w: session id %q", errBadRequest, id)
	}
	ok, err := s.owns(r, user, id)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, errNotYours
	}
	out := []agent.WakeUp{}
	for _, name := range s.names {
		if runner.KindOf(s.runners[name]) != runner.KindAgent {
			continue
		}
		ups, err := s.rt.WakeUps(r.Context(), name, id)
		if err != nil {
			return nil, err
		}
		out = append(out, ups...)
	}
	slices.SortStableFunc(out, func(a, b agent.WakeUp) int { return a.Due.Compare(b.Due) })
	return out, nil
}

// sessionWakeUps serves GET /v1/sessions/{id}/wakeups: the follow-ups
// pending in a session of the user, the earliest due first.
func (s *Server) sessionWakeUps(w http.ResponseWriter, r *http.Request) {
	ups, err := s.wakeUpsOf(r, userOf(r), r.PathValue("id"))
	if err != nil {
		s.requestError(w, r, err)
		return
	}
	writeJSON(w, struct {
		WakeUps []agent.WakeUp `json:"wakeups"`
	}{ups})
}

// cancelWakeUp serves DELETE /v1/sessions/{id}/wakeups/{wakeup...}: the
// follow-up (its id, [agent.WakeUp.ID], may hold slashes) is cancelled
// unless it fired first. One that is not pending in the user's session is
// not found.
func (s *Server) cancelWakeUp(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("wakeup")
	ups, err := s.wakeUpsOf(r, userOf(r), r.PathValue("id"))
	if err != nil {
		s.requestError(w, r, err)
		return
	}
	missing := notFound(fmt.Sprintf("no follow-up %q pending in this session", id))
	if !slices.ContainsFunc(ups, func(u agent.WakeUp) bool { return u.ID == id }) {
		s.requestError(w, r, missing)
		return
	}
	pending, err := s.rt.CancelWakeUp(r.Context(), id)
	if err != nil {
		s.requestError(w, r, err)
		return
	}
	if !pending { // it fired, or another request cancelled it, meanwhile
		s.requestError(w, r, missing)
		return
	}
	writeJSON(w, struct {
		ID        string `json:"id"`
		Cancelled bool   `json:"cancelled"`
	}{id, true})
}
