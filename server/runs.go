package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/deadletter"
	"github.com/calf-go/calf/internal/signals"
	"github.com/calf-go/calf/runner"
	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/team"
	"github.com/calf-go/calf/workflow"
)

// maxRunsListed bounds GET /v1/runs.
const maxRunsListed = 200

// runs serves GET /v1/runs: the user's agent and team runs, newest first,
// filtered by ?agent= (an agent or team name) and ?status=, at most ?limit=
// (default 50, at most 200).
func (s *Server) runs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := &runner.RunFilter{Name: q.Get("agent"), Status: q.Get("status"), Limit: 50}
	if f.Status != "" && !slices.Contains(runner.Statuses, f.Status) {
		s.requestError(w, r, fmt.Errorf("%w: status %q: use one of %v", errBadRequest, f.Status, runner.Statuses))
		return
	}
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n <= 0 || n > maxRunsListed {
			s.requestError(w, r, fmt.Errorf("%w: limit %q: give 1 to %d", errBadRequest, l, maxRunsListed))
			return
		}
		f.Limit = n
	}
	user := userOf(r)
	if len(s.opts.Tokens) > 0 {
		f.Keep = func(ctx context.Context, run runner.RunSummary) (bool, error) {
			err := s.checkRun(ctx, user, run.ID)
			if errors.Is(err, errNotYours) {
				return false, nil
			}
			return err == nil, err
		}
	}
	runs, err := runner.Runs(r.Context(), s.rt.Store(), f)
	if err != nil {
		s.requestError(w, r, err)
		return
	}
	writeJSON(w, struct {
		Runs []runner.RunSummary `json:"runs"`
	}{Runs: append([]runner.RunSummary{}, runs...)})
}

// run serves GET /v1/runs/{id}: the summary of a run of the user.
func (s *Server) run(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !sessionID.MatchString(id) {
		s.requestError(w, r, fmt.Errorf("%w: run id %q", errBadRequest, id))
		return
	}
	if err := s.checkRun(r.Context(), userOf(r), id); err != nil {
		s.requestError(w, r, err)
		return
	}
	sum, err := runner.Summarize(r.Context(), s.rt.Store(), id)
	if errors.Is(err, store.ErrNotFound) {
		err = errNotYours
	}
	if err != nil {
		s.requestError(w, r, err)
		return
	}
	writeJSON(w, sum)
}

// ownsLetter reports whether user may see and replay the dead letter rec:
// it parked a message of one of the user's runs (by run id, or by the
// correlation id of the run that started it), or the server has no
// tokens.
func (s *Server) ownsLetter(ctx context.Context, user string, rec *deadletter.Record) (bool, error) {
	if len(s.opts.Tokens) == 0 {
		return true, nil
	}
	if rec.Message == nil {
		return false, nil
	}
	md := rec.Message.Metadata
	for _, id := range []string{md.CorrelationID, md.RunID} {
		if id == "" {
			continue
		}
		switch err := s.checkRun(ctx, user, id); {
		case err == nil:
			return true, nil
		case !errors.Is(err, errNotYours):
			return false, err
		}
	}
	return false, nil
}

// deadLetters serves GET /v1/deadletters: the dead letters of the user's
// runs, newest first (at most 200).
func (s *Server) deadLetters(w http.ResponseWriter, r *http.Request) {
	recs, err := deadletter.List(r.Context(), s.rt.Store())
	if err != nil {
		s.requestError(w, r, err)
		return
	}
	user := userOf(r)
	out := []*deadletter.Record{}
	for _, rec := range recs {
		ok, err := s.ownsLetter(r.Context(), user, rec)
		if err != nil {
			s.requestError(w, r, err)
			return
		}
		if ok {
			out = append(out, rec)
		}
	}
	slices.SortStableFunc(out, func(a, b *deadletter.Record) int { return b.Time.Compare(a.Time) })
	writeJSON(w, struct {
		DeadLetters []*deadletter.Record `json:"dead_letters"`
	}{DeadLetters: out[:min(len(out), maxRunsListed)]})
}

// replayDeadLetter serves POST /v1/deadletters/{id}/replay: the parked
// message is published again on its channel, once ([deadletter.Replay]).
func (s *Server) replayDeadLetter(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id := r.PathValue("id")
	st := s.rt.Store()
	rec, err := deadletter.Get(ctx, st, id)
	if errors.Is(err, deadletter.ErrNotFound) || errors.Is(err, store.ErrNotFound) {
		err = errNotYours
	}
	if err == nil {
		var ok bool
		if ok, err = s.ownsLetter(ctx, userOf(r), rec); err == nil && !ok {
			err = errNotYours
		}
	}
	if err != nil {
		s.requestError(w, r, err)
		return
	}
	rec, published, err := deadletter.Replay(ctx, s.rt.Client().Broker(), st, id, s.rt.Client().Now())
	if err != nil {
		s.requestError(w, r, err)
		return
	}
	writeJSON(w, struct {
		*deadletter.Record
		Published bool `json:"published"`
	}{rec, published})
}

// signalRun sends the signal of POST /v1/runs/{id}/signals/{name} to the
// run: the body, when not empty, is the signal's value (JSON). It answers
// 202 with the run's summary; 404 for a run the user may not see or that
// does not exist; 409 for a run that has ended; 400 for a bad name or a
// value that is not JSON. Under an [IdempotencyHeader], the same signal
// sent again is delivered once and answered again; another signal under
// the key is refused with 409 (code idempotency_conflict).
func (s *Server) signalRun(w http.ResponseWriter, r *http.Request) {
	id, name := r.PathValue("id"), r.PathValue("name")
	if !sessionID.MatchString(id) {
		s.requestError(w, r, fmt.Errorf("%w: run id %q", errBadRequest, id))
		return
	}
	if err := signals.CheckSent(name); err != nil {
		s.requestError(w, r, fmt.Errorf("%w: %v", errBadRequest, err))
		return
	}
	if err := s.checkRun(r.Context(), userOf(r), id); err != nil {
		s.requestError(w, r, err)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		s.requestError(w, r, err)
		return
	}
	var value any
	if len(bytes.TrimSpace(body)) > 0 {
		if !json.Valid(body) {
			s.requestError(w, r, fmt.Errorf("%w: the body, the signal's value, is not JSON", errBadRequest))
			return
		}
		value = json.RawMessage(body)
	}
	run, err := runner.LoadRun(r.Context(), s.rt.Store(), id)
	if errors.Is(err, store.ErrNotFound) {
		err = errNotYours
	}
	if err != nil {
		s.requestError(w, r, err)
		return
	}
	s.rt.AddKind(team.Kind, workflow.Kind)
	// Under an Idempotency-Key, the same signal sent again is delivered
	// once.
	v, err := s.rt.SignalWith(r.Context(), run.View().Ref(), name, value, &agent.SignalOptions{IdempotencyKey: r.Header.Get(IdempotencyHeader)})
	if err != nil {
		s.requestError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusAccepted)
	writeJSON(w, runner.SummarizeView(v))
}
