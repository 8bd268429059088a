package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/agent/approval"
	"github.com/calf-go/calf/agent/session"
	"github.com/calf-go/calf/internal/httperr"
	"github.com/calf-go/calf/schedule"
	"github.com/calf-go/calf/store"
)

// KindSessionOwner is the kind of the records that say which user of a
// server a session belongs to, by session id.
const KindSessionOwner = "session_owner"

// KindRunOwner is the kind of the records that say which user of a server
// started a run, by run id.
const KindRunOwner = "run_owner"

// SessionHeader names the session a request to the OpenAI-compatible API
// continues. Without it, a request is stateless: the conversation is the
// messages it sends.
const SessionHeader = "Calf-Session-Id"

// RunHeader, in a response, names the run that answered.
const RunHeader = "Calf-Run-Id"

// sessionID is what a session id may be: letters, digits and ._:- , at
// most 128 characters, starting with a letter or digit.
var sessionID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`)

// ValidSessionID reports whether id is a session id the server takes:
// letters, digits and ._:- , at most 128 characters, starting with a
// letter or digit.
func ValidSessionID(id string) bool { return sessionID.MatchString(id) }

// errNotYours is returned for a session or run that does not exist, or
// exists and belongs to another user (or to no user of a server with
// tokens). It matches store.ErrNotFound, so that a user cannot learn which
// ids others use: a 404 "not_found".
var errNotYours = notFound("no such session or run")

// notFound is something the request names that does not exist or is
// another user's, the two told apart by nothing: a 404 "not_found" with
// the message msg, or the message alone over the WebSocket bridge.
func notFound(msg string) error {
	return &httperr.Error{Kind: store.ErrNotFound, Message: msg}
}

// approvalOf returns the approval request id when user may answer it (it
// belongs to a run user may read); the error for one that does not exist
// and for another user's is the same, says what (an "approval" or an
// "interrupt"), and matches no other.
func (s *Server) approvalOf(ctx context.Context, user, what, id string) (*approval.Approval, error) {
	a, err := approval.Get(ctx, s.rt.Store(), id)
	if err == nil {
		err = s.checkRun(ctx, user, a.RunID)
	}
	if errors.Is(err, store.ErrNotFound) { // approval.ErrNotFound and errNotYours among them
		return nil, notFound(fmt.Sprintf("no %s %q", what, id))
	}
	if err != nil {
		return nil, err
	}
	return a, nil
}

// owner is a session_owner or run_owner record.
type owner struct {
	User string `json:"user"`
}

// claimSession makes sure the session id may be used by user: a session
// that user started, or a new one, which then becomes user's. A server
// without tokens serves one user, who may also use the sessions that other
// commands of this machine made.
func (s *Server) claimSession(ctx context.Context, user, id string) error {
	if !sessionID.MatchString(id) {
		return fmt.Errorf("%w: %s %q: use letters, digits and ._:- (at most 128)", errBadRequest, SessionHeader, id)
	}
	st := s.rt.Store()
	for range 3 {
		rec, err := st.Get(ctx, KindSessionOwner, id)
		switch {
		case err == nil:
			var o owner
			if err := json.Unmarshal(rec.Data, &o); err != nil {
				return fmt.Errorf("server: the owner record of session %s: %w", id, err)
			}
			if o.User != user {
				return errNotYours
			}
			return nil
		case !errors.Is(err, store.ErrNotFound):
			return err
		}
		if _, err := session.LoadInfo(ctx, s.rt.Store(), id); err == nil {
			if len(s.opts.Tokens) == 0 {
				return nil
			}
			return errNotYours
		} else if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		data, _ := json.Marshal(owner{User: user})
		if _, err := st.Put(ctx, KindSessionOwner, id, data, 0); err == nil {
			return nil
		} else if !errors.Is(err, store.ErrConflict) {
			return err
		}
		// Another request claimed it first: read whose it is.
	}
	return fmt.Errorf("server: session %s: its owner record keeps changing", id)
}

// ownRun records that user starts the run id.
func (s *Server) ownRun(ctx context.Context, user, id string) error {
	data, _ := json.Marshal(owner{User: user})
	_, err := s.rt.Store().Put(ctx, KindRunOwner, id, data, 0)
	if errors.Is(err, store.ErrConflict) {
		// Recorded before: the run of a request sent again under its
		// idempotency key, which is the user's own, unless it is not.
		if err := s.checkRun(ctx, user, id); err != nil {
			return fmt.Errorf("server: run %s: %w", id, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("server: record the owner of run %s: %w", id, err)
	}
	return nil
}

// checkRun returns errNotYours unless user may read the run id: the user
// who started it through the server, the owner of the schedule that
// started it, or anybody on a server without tokens.
func (s *Server) checkRun(ctx context.Context, user, id string) error {
	if len(s.opts.Tokens) == 0 {
		return nil
	}
	rec, err := s.rt.Store().Get(ctx, KindRunOwner, id)
	if errors.Is(err, store.ErrNotFound) {
		// A run a schedule started is the schedule's owner's.
		if name, ok := schedule.NameOf(id); ok {
			if ok, err := s.ownsSchedule(ctx, user, name); err != nil || ok {
				return err
			}
		}
		return errNotYours
	}
	if err != nil {
		return err
	}
	var o owner
	if err := json.Unmarshal(rec.Data, &o); err != nil {
		return fmt.Errorf("server: the owner record of run %s: %w", id, err)
	}
	if o.User != user {
		return errNotYours
	}
	return nil
}

// findRun returns errNotYours unless user may read the run id (checkRun)
// and the run exists. A run exists when it has an owner record (the
// server records one before it starts a run), a run record, or an event
// in its log; a run started by another process may have none yet when it
// is asked for as it starts, so an id that has none is looked for in its
// log for agent.DefaultStartTimeout before it is not found.
func (s *Server) findRun(ctx context.Context, user, id string) error {
	if err := s.checkRun(ctx, user, id); err != nil {
		return err
	}
	if len(s.opts.Tokens) > 0 {
		return nil // checkRun found its owner record
	}
	st := s.rt.Store()
	if _, err := st.Get(ctx, KindRunOwner, id); !errors.Is(err, store.ErrNotFound) {
		return err
	}
	if _, err := s.rt.LoadAgentRun(ctx, id); !errors.Is(err, store.ErrNotFound) {
		return err
	}
	if s.opts.Log == nil {
		return errNotYours
	}
	wctx, cancel := context.WithTimeout(ctx, agent.DefaultStartTimeout)
	defer cancel()
	for _, err := range s.opts.Log.Follow(wctx, id, 0) {
		switch {
		case err == nil:
			return nil // it has an event
		case ctx.Err() != nil:
			return ctx.Err()
		case wctx.Err() != nil:
			return errNotYours
		default:
			return err
		}
	}
	return errNotYours
}
