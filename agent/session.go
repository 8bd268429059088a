package agent

import (
	"context"
	"errors"
	"fmt"

	"github.com/calf-go/calf/agent/internal/engine"
	"github.com/calf-go/calf/agent/internal/sessionstore"
	"github.com/calf-go/calf/store"
)

// The sessions of a runtime's store are package agent/session's; the
// engine marks a run's start and end in its session and reads the
// session's messages through rt.sessions, which caches them.

// startSessionRun records that the run st, in a session, started: the
// session is created if it is new, with the start of the prompt as title.
// known, when set, is the session's record as the caller has just read
// it, at version.
func (rt *Runtime) startSessionRun(ctx context.Context, st *runState, prompt string, known *sessionstore.Record, version int64) error {
	return rt.sessions.StartRun(ctx, st.SessionID, st.RunID, prompt, known, version)
}

// endSessionRun records that the run st, in a session, ended: a run that
// completed (or handed off) adds its messages (those keep says) and its
// compaction, once; every run adds its usage and leaves the session's
// active runs. What a run adds depends on st and keep only, so a run's end
// applied again adds the same part.
func (rt *Runtime) endSessionRun(ctx context.Context, st *runState, answersOnly bool) error {
	if st.SessionID == "" {
		return nil
	}
	adds := st.Status == RunComplete || st.Status == RunHandedOff
	if adds && st.Bare() && st.Archived > 0 {
		if err := rt.readBack(ctx, st); err != nil { // NewMessages needs the archived ones
			return err
		}
	}
	msgs, compacted := st.NewMessages(), st.Compacted
	if answersOnly {
		if kept := engine.OnlyAnswers(msgs); len(kept) < len(msgs) {
			msgs = kept
			if compacted != nil && compacted.Upto > st.HistoryLen {
				compacted = nil // it stands for messages the session does not get
			}
		}
	}
	return rt.sessions.EndRun(ctx, sessionstore.RunEnd{
		Session: st.SessionID, Run: st.RunID, Adds: adds, Messages: msgs,
		Usage: st.Usage, Cost: st.Cost, Compacted: compacted, HistoryLen: st.HistoryLen,
	})
}

// SetSessionBudget sets the budget of the session id (nil: none), which
// bounds what its runs spend together, counted from what the session had
// spent when each run started; the session is created if it does not
// exist. The runs of the session in progress take the new budget, and
// those it paused go on at once if it lets them; those it still stops
// stay paused, with no event (see [Runtime.SetBudget]). Package
// agent/session reads a session's budget.
func (rt *Runtime) SetSessionBudget(ctx context.Context, id string, b *Budget) error {
	if rt == nil {
		return ErrNoRuntime
	}
	if b != nil {
		if err := b.Validate(); err != nil {
			return fmt.Errorf("agent: set the budget of session %s: %w", id, err)
		}
	}
	active, err := rt.sessions.SetBudget(ctx, id, (*sessionstore.Budget)(b))
	if err != nil {
		return fmt.Errorf("agent: set the budget of session %s: %w", id, err)
	}
	for _, run := range active {
		st, err := rt.loadRun(ctx, run)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		var resumed bool
		st, err = rt.updateChain(ctx, st.Agent, run, nil, func(st *runState) (bool, error) {
			st.SessionBudget = b
			if b != nil && st.SessionSpent == nil {
				st.SessionSpent = &Spent{}
			}
			resumed = st.Paused() && st.Pause.Budget != nil && st.Pause.Budget.Scope == "session"
			if resumed && st.Pause.Budget.stops(b, st) && !b.Fail {
				st.keepPaused(b) // no event: it still waits for a budget that lets it go on
				resumed = false
			}
			if resumed {
				st.Pause = nil
				st.CountResume()
			}
			return true, nil
		})
		if errors.Is(err, ErrRunEnded) {
			continue
		}
		if err != nil {
			return fmt.Errorf("agent: set the budget of session %s: run %s: %w", id, run, err)
		}
		if resumed {
			if err := rt.emitResume(ctx, st); err != nil {
				return fmt.Errorf("agent: set the budget of session %s: run %s: %w", id, run, err)
			}
		}
	}
	return nil
}
