package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/calf-go/calf/internal/httperr"
	"github.com/calf-go/calf/runner"
	"github.com/calf-go/calf/schedule"
	"github.com/calf-go/calf/store"
)

// KindScheduleOwner is the kind of the records that say which user of a
// server created a schedule, by schedule name. A schedule without one
// (added by calf schedules or by a program) is seen only on a server
// without tokens.
const KindScheduleOwner = "schedule_owner"

// ScheduleView is a schedule as GET /v1/schedules and the other schedule
// endpoints answer it: the stored [schedule.Schedule] (its spec, whether
// it is paused, its next firing and its last firings with the runs they
// started), its durations written as Go durations ("15m0s") rather than
// in nanoseconds.
type ScheduleView struct {
	*schedule.Schedule
	Every     string `json:"every,omitempty"`
	Tolerance string `json:"tolerance,omitempty"`
	Window    string `json:"window,omitempty"`
}

// viewSchedule returns the view of sc.
func viewSchedule(sc *schedule.Schedule) ScheduleView {
	v := ScheduleView{Schedule: sc}
	if sc.Every > 0 {
		v.Every = sc.Every.String()
	}
	if sc.Tolerance > 0 {
		v.Tolerance = sc.Tolerance.String()
	}
	if sc.Window > 0 {
		v.Window = sc.Window.String()
	}
	return v
}

// ScheduleRequest is the body of POST /v1/schedules: a [schedule.Spec]
// whose durations are written as Go durations ("90s", "15m", "6h").
// Kind may be left out: it is then the kind of the runner the server
// serves under that name.
type ScheduleRequest struct {
	Name      string          `json:"name"`
	Kind      string          `json:"kind,omitempty"`
	Runner    string          `json:"runner"`
	Prompt    string          `json:"prompt,omitempty"`
	State     json.RawMessage `json:"state,omitempty"`
	Cron      string          `json:"cron,omitempty"`
	TimeZone  string          `json:"time_zone,omitempty"`
	Every     string          `json:"every,omitempty"`
	Overlap   string          `json:"overlap,omitempty"`
	CatchUp   string          `json:"catch_up,omitempty"`
	Tolerance string          `json:"tolerance,omitempty"`
	Window    string          `json:"window,omitempty"`
}

// scheduleSpec returns the schedule.Spec of req, checked: its runner must be one
// the server serves, of its kind.
func (s *Server) scheduleSpec(req *ScheduleRequest) (schedule.Spec, error) {
	spec := schedule.Spec{Name: req.Name, Kind: req.Kind, Runner: req.Runner, Prompt: req.Prompt, State: req.State,
		Cron: req.Cron, TimeZone: req.TimeZone, Overlap: schedule.Overlap(req.Overlap), CatchUp: schedule.CatchUp(req.CatchUp)}
	for _, d := range []struct {
		field, text string
		to          *time.Duration
	}{{"every", req.Every, &spec.Every}, {"tolerance", req.Tolerance, &spec.Tolerance}, {"window", req.Window, &spec.Window}} {
		if d.text == "" {
			continue
		}
		v, err := time.ParseDuration(d.text)
		if err != nil {
			return spec, fmt.Errorf("%w: %s %q: a duration such as 90s, 15m or 6h", errBadRequest, d.field, d.text)
		}
		*d.to = v
	}
	if spec.Runner != "" {
		r, ok := s.runners[spec.Runner]
		if !ok {
			return spec, fmt.Errorf("%w: runner %q: this server serves %v", errBadRequest, spec.Runner, s.names)
		}
		kind := runner.KindOf(r)
		if spec.Kind == "" {
			spec.Kind = kind
		}
		if spec.Kind != kind {
			return spec, fmt.Errorf("%w: %s is a %s, not a %s", errBadRequest, spec.Runner, kind, spec.Kind)
		}
	}
	if err := spec.Validate(); err != nil {
		return spec, &httperr.Error{Kind: errBadRequest, Message: err.Error()}
	}
	return spec, nil
}

// ownsSchedule reports whether user may see and control the schedule
// name: the user who created it through the server, or anybody on a
// server without tokens.
func (s *Server) ownsSchedule(ctx context.Context, user, name string) (bool, error) {
	if len(s.opts.Tokens) == 0 {
		return true, nil
	}
	rec, err := s.rt.Store().Get(ctx, KindScheduleOwner, name)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	var o owner
	if err := json.Unmarshal(rec.Data, &o); err != nil {
		return false, fmt.Errorf("server: the owner record of schedule %s: %w", name, err)
	}
	return o.User == user, nil
}

// scheduleOf returns the schedule name when user may see it; one that
// does not exist and another user's get the same error, a 404.
func (s *Server) scheduleOf(ctx context.Context, user, name string) (*schedule.Schedule, error) {
	missing := notFound(fmt.Sprintf("no schedule %q", name))
	ok, err := s.ownsSchedule(ctx, user, name)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, missing
	}
	sc, err := s.sched.Get(ctx, name)
	if errors.Is(err, store.ErrNotFound) { // schedule.ErrNotFound
		return nil, missing
	}
	return sc, err
}

// listSchedules serves GET /v1/schedules: the user's schedules, by name,
// each with its next firing, whether it is paused, and its last firings.
func (s *Server) listSchedules(w http.ResponseWriter, r *http.Request) {
	all, err := s.sched.List(r.Context())
	if err != nil {
		s.requestError(w, r, err)
		return
	}
	user := userOf(r)
	out := []ScheduleView{}
	for _, sc := range all {
		ok, err := s.ownsSchedule(r.Context(), user, sc.Name)
		if err != nil {
			s.requestError(w, r, err)
			return
		}
		if ok {
			out = append(out, viewSchedule(sc))
		}
	}
	writeJSON(w, struct {
		Schedules []ScheduleView `json:"schedules"`
	}{out})
}

// getSchedule serves GET /v1/schedules/{name}.
func (s *Server) getSchedule(w http.ResponseWriter, r *http.Request) {
	sc, err := s.scheduleOf(r.Context(), userOf(r), r.PathValue("name"))
	if err != nil {
		s.requestError(w, r, err)
		return
	}
	writeJSON(w, viewSchedule(sc))
}

// createSchedule serves POST /v1/schedules: a new schedule of the user,
// from a [ScheduleRequest], answered 201 with its view and a Location;
// 400 for a spec that cannot be scheduled, 409 for a name that is taken.
func (s *Server) createSchedule(w http.ResponseWriter, r *http.Request) {
	data, err := io.ReadAll(r.Body)
	if err != nil {
		s.requestError(w, r, err)
		return
	}
	var req ScheduleRequest
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		s.requestError(w, r, fmt.Errorf("%w: the body is not a schedule's spec: %v", errBadRequest, err))
		return
	}
	if dec.More() {
		s.requestError(w, r, fmt.Errorf("%w: the body has data after its JSON object", errBadRequest))
		return
	}
	spec, err := s.scheduleSpec(&req)
	if err != nil {
		s.requestError(w, r, err)
		return
	}
	ctx := r.Context()
	sc, err := s.sched.Add(ctx, spec)
	if sc == nil {
		s.requestError(w, r, err)
		return
	}
	// Added: its owner now (a record left by a deleted schedule of the
	// name is replaced). A schedule whose owner cannot be recorded would
	// be nobody's: it goes.
	owned, _ := json.Marshal(owner{User: userOf(r)})
	if _, oerr := store.Update(ctx, s.rt.Store(), KindScheduleOwner, spec.Name, func([]byte, bool) ([]byte, error) { return owned, nil }); oerr != nil {
		_ = s.sched.Delete(context.WithoutCancel(ctx), spec.Name)
		s.requestError(w, r, fmt.Errorf("server: record the owner of schedule %s: %w", spec.Name, oerr))
		return
	}
	if err != nil { // stored, its first firing not armed
		s.requestError(w, r, err)
		return
	}
	w.Header().Set("Location", "/v1/schedules/"+spec.Name)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(viewSchedule(sc))
}

// controlSchedule serves POST /v1/schedules/{name}/pause and /resume:
// the schedule after the change.
func (s *Server) controlSchedule(do func(ctx context.Context, name string) (*schedule.Schedule, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		if _, err := s.scheduleOf(r.Context(), userOf(r), name); err != nil {
			s.requestError(w, r, err)
			return
		}
		sc, err := do(r.Context(), name)
		if err != nil {
			s.requestError(w, r, err)
			return
		}
		writeJSON(w, viewSchedule(sc))
	}
}

// triggerSchedule serves POST /v1/schedules/{name}/trigger: the schedule
// fires now, once, paused or not; 202 with the id of the run it starts.
func (s *Server) triggerSchedule(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if _, err := s.scheduleOf(r.Context(), userOf(r), name); err != nil {
		s.requestError(w, r, err)
		return
	}
	id, err := s.sched.Trigger(r.Context(), name)
	if err != nil {
		s.requestError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusAccepted)
	writeJSON(w, struct {
		Schedule string `json:"schedule"`
		RunID    string `json:"run_id"`
	}{name, id})
}

// deleteSchedule serves DELETE /v1/schedules/{name}: the schedule goes
// (the runs it started stay, seen only on a server without tokens).
func (s *Server) deleteSchedule(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	name := r.PathValue("name")
	if _, err := s.scheduleOf(ctx, userOf(r), name); err != nil {
		s.requestError(w, r, err)
		return
	}
	if err := s.sched.Delete(ctx, name); err != nil {
		s.requestError(w, r, err)
		return
	}
	st := s.rt.Store()
	if rec, err := st.Get(ctx, KindScheduleOwner, name); err == nil {
		_ = st.Delete(ctx, KindScheduleOwner, name, rec.Version) // a stale one is replaced by the next owner
	}
	writeJSON(w, struct {
		Name    string `json:"name"`
		Deleted bool   `json:"deleted"`
	}{name, true})
}
