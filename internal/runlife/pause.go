package runlife

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/calf-go/calf"
)

// ErrRunEnded is matched by the error of a control (a pause, a resume, a
// budget) of a run that has ended. The agent package exports it as
// agent.ErrRunEnded.
var ErrRunEnded = errors.New("agent: the run has ended")

// Record is the record of one run, of any kind, as the run controls read
// it.
type Record interface {
	// RunEnded returns the status of a run that has ended, "" while it
	// goes on.
	RunEnded() string
}

// Pausable is the record of one run as the pause protocol reads and
// changes it, its pause of the kind's type P: each kind implements it on
// its own fields (a pause, a count of resumes, the step the last resume
// let go on).
//
// A pause is asked for (a pause recorded) and takes effect at a step
// boundary, before the step starts (Paused): the run then waits, with
// nothing but its record, for a resume. A resume of a pause in effect is
// counted, and the step it lets go on remembered, in the same
// compare-and-swap that forgets the pause; its events, sent after, carry
// the count in their ids ([ResumeID], [ResumedID]). Until the step has
// started, ResumeUnsent reports that they may not all have been sent: a
// second resume, or a recovery, sends them again, with the same ids.
type Pausable[P any] interface {
	Record
	// PauseField returns the address of the run's pause: nil while none
	// is asked for. A pause recorded is never changed in place: records
	// may share it with cached copies.
	PauseField() **P
	// Paused reports whether the pause is in effect: the run waits before
	// its current step.
	Paused() bool
	// CountResume records a resume of the pause in effect: it counts it,
	// and remembers the current step as the one it lets go on.
	CountResume()
	// ResumeUnsent reports whether the events of the run's last resume
	// may not all have been sent: the step it let go on is the current
	// one, has not started, and was not paused again.
	ResumeUnsent() bool
}

// Update changes the stored record of one run in a compare-and-swap:
// change is given the record as stored and reports whether it changed it
// (its error ends the update). Update returns the record as it stands,
// or an error matching [store.ErrNotFound] for a run with no record.
type Update[S any] func(ctx context.Context, change func(st S) (bool, error)) (S, error)

// ended returns the error of a control of a run that has ended with
// status: it matches [ErrRunEnded].
func ended(status string) error { return fmt.Errorf("%w with status %s", ErrRunEnded, status) }

// Change applies change to the record of a run that has not ended, with
// update, and returns the record as it stands. The record of a run that
// has ended is left alone, and returned with an error matching
// [ErrRunEnded].
func Change[S Record](ctx context.Context, update Update[S], change func(st S) (bool, error)) (S, error) {
	st, err := update(ctx, func(st S) (bool, error) {
		if st.RunEnded() != "" {
			return false, nil
		}
		return change(st)
	})
	if err != nil {
		return st, err
	}
	if status := st.RunEnded(); status != "" {
		return st, ended(status)
	}
	return st, nil
}

// Pause records pause, a pause asked of a run, with update, unless the
// run has one already, and returns the record as it stands. Pausing a
// paused run changes nothing; a run that has ended is an error matching
// [ErrRunEnded], one with no record an error matching [store.ErrNotFound].
func Pause[S Pausable[P], P any](ctx context.Context, update Update[S], pause *P) (S, error) {
	return Change(ctx, update, func(st S) (bool, error) {
		if p := st.PauseField(); *p == nil {
			*p = pause
			return true, nil
		}
		return false, nil
	})
}

// Resume records the resume of a run, with update: its pause is
// forgotten, and a pause in effect is counted as resumed at the run's
// step. It returns the record as it stands, and whether the caller is to
// send the resume's events: those of this resume, or of an earlier one
// whose events may not all have been sent (see [Pausable]). Resuming a
// run that is not paused changes nothing; a run that has ended is an
// error matching [ErrRunEnded], one with no record an error matching
// [store.ErrNotFound].
func Resume[S Pausable[P], P any](ctx context.Context, update Update[S]) (S, bool, error) {
	st, err := Change(ctx, update, func(st S) (bool, error) {
		p := st.PauseField()
		if *p == nil {
			return false, nil
		}
		inEffect := st.Paused()
		*p = nil
		if inEffect {
			st.CountResume()
		}
		return true, nil
	})
	if err != nil {
		return st, false, err
	}
	return st, st.ResumeUnsent(), nil
}

// Stepped is a [Pausable] record whose pause is put in effect by
// [TakeEffect].
type Stepped[P any] interface {
	Pausable[P]
	// RunStep is the run's current step.
	RunStep() int
	// PauseAt puts the pause asked for in effect at the current step, at
	// now. The record's pause is replaced, not changed: records may share
	// it with cached copies.
	PauseAt(now time.Time)
}

// TakeEffect records, with update, that the pause asked of a run takes
// effect before step, its current step, which has not started (started
// reports whether a record's step has). It returns the record as it
// stands and whether the pause is in effect: false when the run was
// resumed, moved on or ended meanwhile. The caller then sends the pause
// event, under [PauseID].
func TakeEffect[S Stepped[P], P any](ctx context.Context, update Update[S], step int, started func(st S) bool, now time.Time) (S, bool, error) {
	st, err := update(ctx, func(st S) (bool, error) {
		if *st.PauseField() == nil || st.RunEnded() != "" || st.RunStep() != step || started(st) || st.Paused() {
			return false, nil
		}
		st.PauseAt(now)
		return true, nil
	})
	if err != nil {
		return st, false, err
	}
	return st, st.Paused(), nil
}

// PauseID is the id of the pause event of a run paused before step after
// n resumes: "{run}.pause.{step}.{n}".
func PauseID(run string, step, n int) string {
	return run + ".pause." + strconv.Itoa(step) + "." + strconv.Itoa(n)
}

// ResumeID is the id of the resume event of the n-th resume (from 1) of
// a run, which let step go on: "{run}.resume.{step}.{n}".
func ResumeID(run string, step, n int) string {
	return run + ".resume." + strconv.Itoa(step) + "." + strconv.Itoa(n)
}

// ResumedID is the id under which the n-th resume of a run sends again
// the event of id its step waits for (the first was consumed when the
// run paused): "{id}.resume.{n}".
func ResumedID(id string, n int) string { return id + ".resume." + strconv.Itoa(n) }

// ResumeEvents are the events of the n-th resume of a run, which let its
// step Step go on: a resume event, then the event the step waits for.
type ResumeEvents struct {
	// Run is the run's id, the events' key; N the count of its resumes.
	Run     string
	Step, N int
	// Metadata is the events' metadata.
	Metadata calf.Metadata
	// PauseChannel is the channel of the run's pauses and resumes, and
	// Resume the resume event's payload, sent under [ResumeID].
	PauseChannel string
	Resume       any
	// StepChannel is the channel of the event the step waits for, Event
	// its payload and EventID its id, under which [ResumedID] sends it.
	StepChannel, EventID string
	Event                any
	// Unsent, when set, is given the error of a resume event not sent,
	// and the step's event is sent all the same; when nil, that error is
	// returned.
	Unsent func(err error)
}

// Send sends the resume event, then the step's event, with c. Sending
// them again is harmless: their ids are those of the first sending.
func (r *ResumeEvents) Send(ctx context.Context, c *calf.Client) error {
	md := calf.WithMetadata(r.Metadata)
	if _, err := c.Emit(ctx, r.PauseChannel, r.Resume, calf.WithID(ResumeID(r.Run, r.Step, r.N)), calf.WithKey(r.Run), md); err != nil {
		if r.Unsent == nil {
			return err
		}
		r.Unsent(err)
	}
	_, err := c.Emit(ctx, r.StepChannel, r.Event, calf.WithID(ResumedID(r.EventID, r.N)), calf.WithKey(r.Run), md)
	return err
}
