package schedule

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	_ "time/tzdata" // time zones on machines without a zoneinfo database
)

// Overlap says what a firing does while the run of an earlier firing is
// still in progress.
type Overlap string

// Overlap policies.
const (
	// OverlapSkip skips the firing (recorded as skipped). The default.
	OverlapSkip Overlap = "skip"
	// OverlapBufferOne keeps the firing (one at most: a later one
	// replaces it) and starts it once the run in progress has ended.
	OverlapBufferOne Overlap = "buffer_one"
	// OverlapAllow starts the firing's run whatever runs.
	OverlapAllow Overlap = "allow"
)

// CatchUp says what a schedule does with the firings it missed while no
// process fired timers (every process stopped, or the store was
// unreachable).
type CatchUp string

// Catch-up policies.
const (
	// CatchUpNone skips the firings missed by more than the schedule's
	// Tolerance; the schedule goes on from the next one. The default.
	CatchUpNone CatchUp = "none"
	// CatchUpLast runs the last firing missed, once.
	CatchUpLast CatchUp = "last"
	// CatchUpAll runs every firing missed within Window (at most
	// [MaxCatchUp] of them, the latest).
	CatchUpAll CatchUp = "all"
)

// Limits and defaults.
const (
	// MaxCatchUp bounds the firings one catch-up runs.
	MaxCatchUp = 100
	// DefaultTolerance is how late a firing may be and still run under
	// CatchUpNone.
	DefaultTolerance = time.Minute
	// DefaultWindow is the window of CatchUpAll.
	DefaultWindow = 24 * time.Hour
	// MinEvery is the shortest interval.
	MinEvery = time.Second
)

// Spec is what a schedule does: start a run of Target, with Prompt (an
// agent's or a team's) or State (a workflow's), at each time Cron or
// Every gives.
type Spec struct {
	// Name names the schedule: 1 to 64 letters, digits, '_', '-' and '.'.
	Name string `json:"name"`
	// Kind is "agent", "team" or "workflow", and Runner the name of the
	// agent, team or workflow whose runs the schedule starts.
	Kind   string `json:"kind"`
	Runner string `json:"runner"`
	// Prompt is the input of an agent's or a team's run; State, the
	// initial state of a workflow's run, as JSON.
	Prompt string          `json:"prompt,omitempty"`
	State  json.RawMessage `json:"state,omitempty"`
	// Cron is a cron expression of five fields (minute, hour, day of
	// month, month, day of week) or a descriptor (@hourly, @daily,
	// @weekly, @monthly, @yearly), read in TimeZone. Give Cron or Every.
	Cron string `json:"cron,omitempty"`
	// TimeZone is the IANA time zone of Cron, such as "Europe/Paris".
	// Default: UTC.
	TimeZone string `json:"time_zone,omitempty"`
	// Every is an interval, from the schedule's creation: the firings
	// are at creation + k*Every. At least a second.
	Every time.Duration `json:"every,omitempty"`
	// Overlap is the overlap policy. Default: [OverlapSkip].
	Overlap Overlap `json:"overlap,omitempty"`
	// CatchUp is the catch-up policy. Default: [CatchUpNone].
	CatchUp CatchUp `json:"catch_up,omitempty"`
	// Tolerance is how late a firing may be and still run under
	// [CatchUpNone]. Default: [DefaultTolerance].
	Tolerance time.Duration `json:"tolerance,omitempty"`
	// Window is how far back [CatchUpAll] runs missed firings. Default:
	// [DefaultWindow].
	Window time.Duration `json:"window,omitempty"`
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// parser reads the five fields, descriptors, and the CRON_TZ prefix.
var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// ErrInvalid is matched by the error of a spec that cannot be scheduled.
var ErrInvalid = errors.New("schedule: invalid spec")

// Validate checks the spec and fills in its defaults, reporting every
// problem at once.
func (s *Spec) Validate() error {
	var errs []string
	if !nameRE.MatchString(s.Name) {
		errs = append(errs, fmt.Sprintf("name %q: use 1 to 64 letters, digits, '_', '-' and '.'", s.Name))
	}
	switch s.Kind {
	case "agent", "team":
		if len(s.State) > 0 {
			errs = append(errs, "state is for a workflow; an "+s.Kind+"'s run takes a prompt")
		}
	case "workflow":
		if s.Prompt != "" {
			errs = append(errs, "prompt is for an agent or a team; a workflow's run takes a state (JSON)")
		}
		if len(s.State) > 0 && !json.Valid(s.State) {
			errs = append(errs, "state is not JSON")
		}
	default:
		errs = append(errs, fmt.Sprintf("kind %q: use agent, team or workflow", s.Kind))
	}
	if s.Runner == "" {
		errs = append(errs, "no runner: name the agent, team or workflow to run")
	}
	switch {
	case s.Cron != "" && s.Every != 0:
		errs = append(errs, "give cron or every, not both")
	case s.Cron == "" && s.Every == 0:
		errs = append(errs, "give cron or every")
	case s.Cron != "":
		if strings.Contains(s.Cron, "TZ=") {
			errs = append(errs, "give the time zone as time_zone, not in the cron expression")
		} else if _, err := s.cron(); err != nil {
			errs = append(errs, err.Error())
		}
	case s.Every < MinEvery:
		errs = append(errs, fmt.Sprintf("every %s: at least %s", s.Every, MinEvery))
	}
	if s.TimeZone != "" && s.Cron == "" {
		errs = append(errs, "time_zone is for cron")
	}
	switch s.Overlap {
	case "":
		s.Overlap = OverlapSkip
	case OverlapSkip, OverlapBufferOne, OverlapAllow:
	default:
		errs = append(errs, fmt.Sprintf("overlap %q: use skip, buffer_one or allow", s.Overlap))
	}
	switch s.CatchUp {
	case "":
		s.CatchUp = CatchUpNone
	case CatchUpNone, CatchUpLast, CatchUpAll:
	default:
		errs = append(errs, fmt.Sprintf("catch_up %q: use none, last or all", s.CatchUp))
	}
	if s.Tolerance < 0 || s.Window < 0 {
		errs = append(errs, "tolerance and window cannot be negative")
	}
	if s.Tolerance == 0 {
		s.Tolerance = DefaultTolerance
	}
	if s.Window == 0 {
		s.Window = DefaultWindow
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w %s: %s", ErrInvalid, s.Name, strings.Join(errs, "; "))
	}
	return nil
}

// cron parses the spec's cron expression in its time zone.
func (s *Spec) cron() (cron.Schedule, error) {
	tz := s.TimeZone
	if tz == "" {
		tz = "UTC"
	}
	if _, err := time.LoadLocation(tz); err != nil {
		return nil, fmt.Errorf("time_zone %q: %v", tz, err)
	}
	sched, err := parser.Parse("CRON_TZ=" + tz + " " + s.Cron)
	if err != nil {
		return nil, fmt.Errorf("cron %q: %v", s.Cron, err)
	}
	return sched, nil
}

// next returns the first firing strictly after t, for a schedule created
// at created; zero when there is none.
func (s *Spec) next(t, created time.Time) time.Time {
	if s.Every > 0 {
		if t.Before(created) {
			return created
		}
		k := t.Sub(created)/s.Every + 1
		return created.Add(k * s.Every)
	}
	c, err := s.cron()
	if err != nil {
		return time.Time{}
	}
	return c.Next(t).UTC()
}
