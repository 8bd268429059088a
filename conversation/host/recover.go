package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/internal/convid"
	"github.com/calf-go/calf/store"
)

// recoverPage is how many inbox records Recover reads at a time.
const recoverPage = 256

// Recover carries on the message each LLM instance was answering when the
// processes that served it ended, so that its answer comes and the
// messages queued behind it follow. For each instance whose queue (its
// [kindInbox] record) has a current message, it takes the message's run
// (ids are derived from the queue, "{instance}.{n}", and ".r{round}" for
// a "# Run" round):
//
//   - unfinished: the run goes on from its last recorded step
//     ([agent.Agent.Recover]); neither the model nor a tool whose outcome
//     is recorded is called again;
//   - ended: its output is emitted again, and the host turns it into the
//     answer (whose id is derived from the run, so an answer sent already
//     is the same message), then starts the next queued message;
//   - never created: the message is submitted again.
//
// Call it once the host serves ([Host.Serve]), when a process starts on a
// broker that loses in-flight messages when the process dies, such as the
// in-memory broker with a durable store (SQLite, PostgreSQL): the queues
// and runs are in the store, the events that would move them forward went
// down with the process. On a durable broker (NATS, Kafka) the broker
// carries them on by itself, and Recover is not needed; called there
// anyway, what it publishes has the ids of the originals and the
// handlers recognise it, so a message is answered once. Processes on
// in-memory brokers of their own that serve the same store at the same
// time would each carry on the others' messages: one process at a time
// serves a store on an in-memory broker.
//
// Recover returns how many messages it carried on. An instance that
// cannot be carried on (its prototype is gone, its agent cannot be made)
// is left as it is and reported in the returned error, after the others.
func (h *Host) Recover(ctx context.Context) (int, error) {
	h.mu.Lock()
	served := h.served
	h.mu.Unlock()
	if !served {
		return 0, errors.New("conversation: recover: the host is not served (Host.Serve)")
	}
	var n int
	var errs []error
	after := ""
	for {
		recs, err := h.convs.Store().List(ctx, kindInbox, "", after, recoverPage)
		if err != nil {
			return n, fmt.Errorf("conversation: recover: list inboxes: %w", err)
		}
		for _, rec := range recs {
			after = rec.ID
			ok, err := h.recoverInbox(ctx, rec)
			if err != nil {
				if ctx.Err() != nil {
					return n, fmt.Errorf("conversation: recover: %w", context.Cause(ctx))
				}
				errs = append(errs, fmt.Errorf("inbox %s: %w", rec.ID, err))
				continue
			}
			if ok {
				n++
			}
		}
		if len(recs) < recoverPage {
			break
		}
	}
	if len(errs) > 0 {
		return n, fmt.Errorf("conversation: recover: %w", errors.Join(errs...))
	}
	return n, nil
}

// recoverInbox carries on the current message of one instance's queue; it
// reports whether there was one.
func (h *Host) recoverInbox(ctx context.Context, rec store.Record) (bool, error) {
	var b inbox
	if err := json.Unmarshal(rec.Data, &b); err != nil {
		return false, err
	}
	if b.Current == nil {
		return false, nil
	}
	conv, inst, _ := strings.Cut(rec.ID, "/")
	proto, _, ok := convid.SplitInstanceID(inst)
	if !ok {
		return false, fmt.Errorf("%q names no instance", inst)
	}
	p, err := h.convs.Prototypes().Get(ctx, proto)
	if err != nil {
		return false, err
	}
	a, err := h.agentFor(ctx, p)
	if err != nil {
		return false, fmt.Errorf("%s cannot be served: %w", inst, err)
	}
	cur := b.Current
	ref := runRef{Conversation: conv, Instance: inst, Prototype: proto, From: cur.From, Correlation: cur.Correlation,
		Msg: cur.Msg, Base: cur.Run, Round: b.Round, Blocks: len(p.Subagents) > 0}
	// Every run that has ended is emitted again: the queue says its
	// output was not taken.
	all := &agent.RecoverOptions{Runs: []string{ref.runID()}, EndedAfter: time.Unix(0, 0)}
	if k, err := a.Recover(ctx, h.rt, all); err != nil || k > 0 {
		return err == nil, err
	}
	if ref.Round == 0 {
		// Never created: submitted again, as enqueue or onOutput would
		// have.
		return true, h.submit(ctx, proto, &ref, cur.Content)
	}
	// A "# Run" round not started: the previous round's output, emitted
	// again, has its block carried out again (onOutput, then onRunBlock,
	// which starts this round).
	prev := ref
	prev.Round--
	all.Runs = []string{prev.runID()}
	k, err := a.Recover(ctx, h.rt, all)
	if err == nil && k == 0 {
		err = fmt.Errorf("neither run %s nor run %s is recorded", ref.runID(), prev.runID())
	}
	return err == nil, err
}
