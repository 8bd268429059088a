package server

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/calf-go/calf/eventlog"
)

// heartbeat is how often a quiet event stream sends a comment, so that
// proxies and clients keep the connection.
const heartbeat = 15 * time.Second

// runEvents serves GET /v1/runs/{id}/events: the events of a run from its
// log, as server-sent events whose ids are the log's ("{run}/{seq}"),
// from the start, or after the event named by the Last-Event-ID header or
// the after query parameter (a sequence number), live until the run ends,
// then an "end" event.
func (s *Server) runEvents(w http.ResponseWriter, r *http.Request) {
	run := r.PathValue("id")
	if !sessionID.MatchString(run) {
		s.requestError(w, r, fmt.Errorf("%w: run id %q", errBadRequest, run))
		return
	}
	if err := s.findRun(r.Context(), userOf(r), run); err != nil {
		s.requestError(w, r, err)
		return
	}
	var after int64
	if last := r.Header.Get("Last-Event-ID"); last != "" {
		log, seq, err := eventlog.ParseID(last)
		if err != nil || log != run {
			s.requestError(w, r, fmt.Errorf("%w: Last-Event-ID %q is not an event of run %s", errBadRequest, last, run))
			return
		}
		after = seq
	} else if q := r.URL.Query().Get("after"); q != "" {
		n, err := strconv.ParseInt(q, 10, 64)
		if err != nil || n < 0 {
			s.requestError(w, r, fmt.Errorf("%w: after %q is not a sequence number", errBadRequest, q))
			return
		}
		after = n
	}
	ev := newSSE(w)
	ctx := r.Context()
	events := make(chan eventlog.Event)
	failed := make(chan error, 1)
	go func() {
		var ferr error
		defer func() {
			failed <- ferr
			close(events)
		}()
		for e, err := range s.opts.Log.FollowRun(ctx, run, after) {
			if err != nil {
				ferr = err
				return
			}
			select {
			case events <- e:
			case <-ctx.Done():
				return
			}
		}
	}()
	ticker := time.NewTicker(heartbeat)
	defer ticker.Stop()
	for {
		select {
		case e, ok := <-events:
			if !ok {
				switch err := <-failed; {
				case err == nil && ctx.Err() == nil:
					_ = ev.event("end", map[string]string{"run": run})
				case ctx.Err() == nil:
					_ = ev.event("error", errorBody{Error: errorObject{Message: err.Error(), Type: "server_error", Code: "log_failed"}})
				}
				return
			}
			if ev.eventWithID(e.ID(), "message", e) != nil {
				return
			}
		case <-ticker.C:
			if ev.comment("ping") != nil {
				return
			}
		case <-ctx.Done():
			return
		}
	}
}
