package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/calf-go/calf/store"
)

// SweepOptions say which finished runs [Runtime.Sweep] removes.
type SweepOptions struct {
	// Before: the runs that ended before it are removed. Required.
	Before time.Time
	// Limit bounds the runs one call removes; 0 means no bound.
	Limit int
}

// SweepResult says what [Runtime.Sweep] removed.
type SweepResult struct {
	// Runs is the number of runs removed; Records the number of records,
	// theirs included.
	Runs, Records int
}

// sweepPage is how many run records Sweep reads at a time.
const sweepPage = 200

// A Sweeper removes from s what a kind of run (a team's, a workflow's)
// leaves behind once it ended before before, and returns how many runs
// and records it removed. Packages whose runs keep records of their own
// register one on the runtime they serve on ([Runtime.AddSweeper]), so
// that [Runtime.Sweep] removes them too.
type Sweeper func(ctx context.Context, s store.Store, before time.Time) (runs, records int, err error)

// AddSweeper registers fn under name, once: a second registration under
// the same name changes nothing.
func (rt *Runtime) AddSweeper(name string, fn Sweeper) {
	rt.sweepMu.Lock()
	defer rt.sweepMu.Unlock()
	if rt.sweepers == nil {
		rt.sweepers = map[string]Sweeper{}
	}
	if _, ok := rt.sweepers[name]; !ok {
		rt.sweepers[name] = fn
		rt.sweepOrder = append(rt.sweepOrder, name)
	}
}

// Sweep removes the runs of any agent that ended (completed, failed, were
// cancelled or handed off) before opts.Before, and those of the teams and
// workflows served on rt (their sweepers, [Runtime.AddSweeper]), with the
// records that belong to them alone; for an agent's run: their tool results, their approval requests, and
// the state custom agents kept for them outside a session. Sessions, and
// the messages runs added to them, are kept until deleted. A removed run
// is gone: Result, and a caller that submits its id again, no longer find
// it (a resubmission starts a new run). Runs in progress are never
// touched. A sweep interrupted midway leaves nothing half removed that
// the next sweep does not finish: a run's own record goes last.
//
// Sweep reads every run record, a page at a time; [Worker] runs it
// periodically when [WorkerOptions.Retention] is set.
func (rt *Runtime) Sweep(ctx context.Context, opts SweepOptions) (*SweepResult, error) {
	if opts.Before.IsZero() {
		return nil, errors.New("agent: Sweep needs SweepOptions.Before")
	}
	res := &SweepResult{}
	rt.sweepMu.Lock()
	var sweepers []Sweeper
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
	for after := ""; ; {
		recs, err := rt.store.List(ctx, store.KindRun, "", after, sweepPage)
		if err != nil {
			return res, fmt.Errorf("agent: sweep: %w", err)
		}
		for _, rec := range recs {
			after = rec.ID
			var head struct {
				Status  RunStatus `json:"status"`
				EndedAt time.Time `json:"ended_at"`
			}
			if json.Unmarshal(rec.Data, &head) != nil || !head.Status.Terminal() || head.EndedAt.IsZero() || !head.EndedAt.Before(opts.Before) {
				continue
			}
			n, err := rt.sweepRun(ctx, rec)
			if err != nil {
				return res, err
			}
			if n > 0 {
				res.Runs++
				res.Records += n
			}
			if opts.Limit > 0 && res.Runs >= opts.Limit {
				return res, nil
			}
		}
		if len(recs) < sweepPage {
			return res, nil
		}
	}
}

// sweepRun removes the run of rec and its records, and returns how many
// records it removed.
func (rt *Runtime) sweepRun(ctx context.Context, rec store.Record) (int, error) {
	id := rec.ID
	n := 0
	del := func(kind, prefix string, keep func(store.Record) bool) error {
		for {
			recs, err := rt.store.List(ctx, kind, prefix, "", sweepPage)
			if err != nil {
				return err
			}
			removed := 0
			for _, r := range recs {
				if keep != nil && keep(r) {
					continue
				}
				if err := rt.store.Delete(ctx, kind, r.ID, 0); err != nil {
					return err
				}
				n++
				removed++
			}
			if len(recs) < sweepPage || removed == 0 {
				return nil
			}
		}
	}
	err := errors.Join(
		del(store.KindToolResult, id+"/", nil),
		// Approval ids start with the run's id, and so do those of the
		// runs it started: keep those, which are their runs' to sweep.
		del(KindApproval, id, func(r store.Record) bool {
			a, err := decodeApproval(r.Data)
			return err != nil || a.RunID != id
		}),
		del(KindAgentState, stateScope("", "", id), nil),
	)
	if err != nil {
		return n, fmt.Errorf("agent: sweep run %s: %w", id, err)
	}
	// The run's record last, and only as it was read: a run changed
	// since is left for another sweep.
	if err := rt.store.Delete(ctx, store.KindRun, id, rec.Version); errors.Is(err, store.ErrConflict) {
		return n, nil
	} else if err != nil {
		return n, fmt.Errorf("agent: sweep run %s: %w", id, err)
	}
	rt.states.forget(id)
	return n + 1, nil
}
