package agent

import (
	"context"
	"fmt"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/internal/runlife"
	"github.com/calf-go/calf/store"
)

// RecoverOptions configures [Agent.Recover]. A nil *RecoverOptions means
// the defaults.
type RecoverOptions struct {
	// WrittenBefore, when set, limits recovery to runs whose state was
	// last written before it, so that a sweep leaves alone the runs that
	// live workers are moving forward. Default: every unfinished run.
	WrittenBefore time.Time
	// EndedAfter, when set, also emits again the output of every run that
	// ended at or after it: a process that recorded a run's end and died
	// before publishing its output leaves a caller waiting. Default: ended
	// runs are left alone (a caller that submits an ended run again gets
	// its output anyway).
	EndedAfter time.Time
	// Runs, when not nil, limits recovery to the runs of these ids, each read
	// by its id rather than by listing every run of the store; an id with
	// no run record is skipped. WrittenBefore and EndedAfter apply to them
	// as to the others. Default: every run of the agent.
	Runs []string
}

// Recover emits again, for every unfinished run of the agent recorded in
// rt's store, the event that continues it: the inference of its current
// step, or the tool calls of the current step that have no result yet.
// It returns how many runs it continued.
//
// Call it when a process starts on a broker that loses in-flight messages
// when the process dies, such as the in-memory broker: the run states are
// in the (durable) store, but the events that would move them forward went
// down with the process. The events carry the ids the handlers give them,
// so on a durable broker, which still holds the originals, they are
// harmless duplicates: the handlers recognise them and neither the model
// nor a tool whose outcome is recorded is called again.
//
// Recover reads the runs of every agent in the store (or those that
// RecoverOptions.Runs names) and skips those of other agents. A record that does not decode is skipped and reported in
// the returned error, after the other runs have been recovered.
func (a *Agent[Out]) Recover(ctx context.Context, rt *Runtime, opts *RecoverOptions) (int, error) {
	rt, err := a.onDemand(ctx, rt)
	if err != nil {
		return 0, err
	}
	var o RecoverOptions
	if opts != nil {
		o = *opts
	}
	h := &handlers{a: &a.spec, rt: rt}
	r := runlife.Recovery{
		What: fmt.Sprintf("agent %s: recover", a.name), Store: rt.store, Kind: store.KindRun,
		Runs: o.Runs, WrittenBefore: o.WrittenBefore,
		One: func(ctx context.Context, rec store.Record) (bool, error) {
			st, err := decodeRunState(rec.Data)
			if err != nil || st.Agent != a.name {
				return false, err
			}
			// The events inherit the run's metadata as if emitted while
			// handling one of its messages.
			rctx := calf.ContextWithMessage(ctx, &calf.Message{
				Metadata: calf.Metadata{CorrelationID: st.correlationID(), RunID: st.RunID, SessionID: st.SessionID},
			})
			if !st.Status.Terminal() {
				return true, h.next(rctx, st)
			}
			if o.EndedAfter.IsZero() || st.EndedAt.Before(o.EndedAfter) {
				return false, nil
			}
			return true, h.finish(rctx, st)
		},
	}
	return r.Run(ctx)
}
