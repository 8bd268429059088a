package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/calf-go/calf/internal/signals"
	"time"

	"github.com/calf-go/calf/agent/approval"
	"github.com/calf-go/calf/agent/internal/engine"
	"github.com/calf-go/calf/agent/internal/runstore"
	"github.com/calf-go/calf/internal/sweep"
	"github.com/calf-go/calf/store"
)

// SweepOptions say which finished runs [Runtime.Sweep] removes.
type SweepOptions struct {
	// Before: the runs that ended before it are removed. Required.
	Before time.Time
	// Limit bounds the runs one call removes; 0 means no bound.
	Limit int
	// Every, when positive, has the processes that share the store sweep
	// it once in that time at most: the sweep is skipped when the store
	// records one, by any process, that started less than Every ago, and
	// one that goes ahead records itself first (a record of kind "sweep").
	// Programs that start often and live briefly, such as calf run, sweep
	// with it, so that each start does not read every run.
	Every time.Duration
}

// SweepResult says what [Runtime.Sweep] removed.
type SweepResult struct {
	// Runs is the number of runs removed; Records the number of records,
	// theirs included.
	Runs, Records int
	// Skipped reports that the sweep did not run: a process swept the
	// store less than [SweepOptions.Every] ago.
	Skipped bool
}

// kindSweep is the store kind of the record of the last sweep of runs that
// used [SweepOptions.Every]: the id "runs", holding {"at": time}.
const kindSweep = "sweep"

// sweepMarkID is the id of the [kindSweep] record.
const sweepMarkID = "runs"

// sweepMark is what the [kindSweep] record holds.
type sweepMark struct {
	At time.Time `json:"at"`
}

// claimSweep reports whether a sweep may go ahead under every: no process
// recorded one that started less than every ago. It records this one,
// with a compare-and-swap, so that of processes starting together one
// sweeps. A record dated more than every ahead of this process's clock is
// taken for a wrong clock's, and replaced.
func (rt *Runtime) claimSweep(ctx context.Context, every time.Duration) (bool, error) {
	now := rt.now()
	var version int64
	rec, err := rt.store.Get(ctx, kindSweep, sweepMarkID)
	switch {
	case err == nil:
		var m sweepMark
		if json.Unmarshal(rec.Data, &m) == nil {
			if age := now.Sub(m.At); age < every && age > -every {
				return false, nil
			}
		}
		version = rec.Version
	case !errors.Is(err, store.ErrNotFound):
		return false, err
	}
	data, err := json.Marshal(sweepMark{At: now})
	if err != nil {
		return false, err
	}
	if _, err := rt.store.Put(ctx, kindSweep, sweepMarkID, data, version); errors.Is(err, store.ErrConflict) {
		return false, nil // another process claimed it first
	} else if err != nil {
		return false, err
	}
	return true, nil
}

// sweepPage is how many records a sweep reads at a time.
const sweepPage = 256

// AddSweeper registers fn under name, once, so that [Runtime.Sweep]
// removes what it sweeps too: a second registration under
// the same name changes nothing.
func (rt *Runtime) AddSweeper(name string, fn store.Sweeper) {
	rt.sweepMu.Lock()
	defer rt.sweepMu.Unlock()
	if rt.sweepers == nil {
		rt.sweepers = map[string]store.Sweeper{}
	}
	if _, ok := rt.sweepers[name]; !ok {
		rt.sweepers[name] = fn
		rt.sweepOrder = append(rt.sweepOrder, name)
	}
}

// Sweep removes the runs of any agent that ended (completed, failed, were
// cancelled or handed off) before opts.Before, and those of the teams and
// workflows served on rt (their sweepers, [Runtime.AddSweeper]), with the
// records that belong to them alone: for an agent's run, its tool results,
// its approval requests, and the state custom agents kept for it outside a
// session. Sessions, and
// the messages runs added to them, are kept until deleted. A removed run
// is gone: Result, and a caller that submits its id again, no longer find
// it (a resubmission starts a new run). Runs in progress are never
// touched. A sweep interrupted midway leaves nothing half removed that
// the next sweep does not finish: a run's own record goes last.
//
// Sweep reads every run record, a page at a time; [Worker] runs it
// periodically when [WorkerOptions.Retention] is set.
func (rt *Runtime) Sweep(ctx context.Context, opts SweepOptions) (*SweepResult, error) {
	if rt == nil {
		return nil, ErrNoRuntime
	}
	if opts.Before.IsZero() {
		return nil, errors.New("agent: Sweep needs SweepOptions.Before")
	}
	res := &SweepResult{}
	if opts.Every > 0 {
		ok, err := rt.claimSweep(ctx, opts.Every)
		if err != nil {
			return nil, fmt.Errorf("agent: sweep: %w", err)
		}
		if !ok {
			res.Skipped = true
			return res, nil
		}
	}
	rt.sweepMu.Lock()
	var sweepers []store.Sweeper
	for _, name := range rt.sweepOrder {
		sweepers = append(sweepers, rt.sweepers[name])
	}
	rt.sweepMu.Unlock()
	for _, fn := range sweepers {
		runs, records, err := fn(ctx, rt.store, opts.Before)
		res.Runs += runs
		res.Records += records
		if err != nil {
			return res, fmt.Errorf("agent: sweep: %w", err)
		}
	}
	runs, records, err := sweep.Ended(ctx, rt.store, store.KindRun, opts.Before, opts.Limit, func(data []byte) (time.Time, bool) {
		var head struct {
			Status  RunStatus `json:"status"`
			EndedAt time.Time `json:"ended_at"`
		}
		if json.Unmarshal(data, &head) != nil {
			return time.Time{}, false
		}
		return head.EndedAt, head.Status.Terminal()
	}, func(rec store.Record) (int, error) {
		n, err := rt.sweepRunRecords(ctx, rec.ID)
		var head struct {
			Agent string `json:"agent"`
		}
		if err == nil && json.Unmarshal(rec.Data, &head) == nil && head.Agent != "" {
			var m int
			m, err = signals.Sweep(ctx, rt.store, agentSignalKey(head.Agent, rec.ID))
			n += m
		}
		return n, err
	})
	res.Runs += runs
	res.Records += records
	if err != nil {
		return res, fmt.Errorf("agent: sweep: %w", err)
	}
	return res, nil
}

// sweepRunRecords removes the records of run id but its own, and returns
// how many it removed.
func (rt *Runtime) sweepRunRecords(ctx context.Context, id string) (int, error) {
	rt.runs.Forget(id)
	n, err := store.DeletePrefix(ctx, rt.store, store.KindToolResult, id+"/")
	if err != nil {
		return n, fmt.Errorf("agent: sweep run %s: %w", id, err)
	}
	m, err := store.DeletePrefix(ctx, rt.store, kindAgentState, stateScope("", "", id))
	n += m
	if err != nil {
		return n, fmt.Errorf("agent: sweep run %s: %w", id, err)
	}
	m, err = store.DeletePrefix(ctx, rt.store, engine.KindClaim, id+"/")
	n += m
	if err != nil {
		return n, fmt.Errorf("agent: sweep run %s: %w", id, err)
	}
	m, err = store.DeletePrefix(ctx, rt.store, runstore.KindRunMessages, id+"/")
	n += m
	if err != nil {
		return n, fmt.Errorf("agent: sweep run %s: %w", id, err)
	}
	m, err = store.DeletePrefix(ctx, rt.store, engine.KindCustomCall, id+"/")
	n += m
	if err != nil {
		return n, fmt.Errorf("agent: sweep run %s: %w", id, err)
	}
	// Approval ids start with the run's id, and so do those of the runs it
	// started: keep those, which are their runs' to sweep.
	for after := ""; ; {
		recs, err := rt.store.List(ctx, approval.Kind, id, after, sweepPage)
		if err != nil {
			return n, fmt.Errorf("agent: sweep run %s: %w", id, err)
		}
		for _, r := range recs {
			after = r.ID
			if a, err := approval.Decode(r.Data); err != nil || a.RunID != id {
				continue
			}
			if err := rt.store.Delete(ctx, approval.KindAnswered, r.ID, 0); err != nil {
				return n, fmt.Errorf("agent: sweep run %s: %w", id, err)
			}
			if err := rt.store.Delete(ctx, approval.Kind, r.ID, 0); err != nil {
				return n, fmt.Errorf("agent: sweep run %s: %w", id, err)
			}
			n++
		}
		if len(recs) < sweepPage {
			return n, nil
		}
	}
}
