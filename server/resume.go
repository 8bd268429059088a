package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/agent/approval"
	"github.com/calf-go/calf/eventlog"
	"github.com/calf-go/calf/internal/httperr"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/runner"
	"github.com/calf-go/calf/store"
)

// OnDisconnectHeader, in a streamed request to the OpenAI-compatible API,
// says what becomes of the run when the client goes away before its end:
// "cancel" (the default, as the OpenAI API does) or "continue", for a
// client that resumes the stream with Last-Event-ID.
const OnDisconnectHeader = "Calf-On-Disconnect"

// resumeOf reads the Last-Event-ID of a streamed request that resumes a
// stream: the run and the number of the last event the client had. ok is
// false for a request that starts a run.
func (s *Server) resumeOf(r *http.Request, stream bool) (run string, last int64, ok bool, err error) {
	id := r.Header.Get("Last-Event-ID")
	if id == "" {
		return "", 0, false, nil
	}
	if !stream || s.opts.Log == nil {
		return "", 0, false, fmt.Errorf("%w: Last-Event-ID resumes a streamed answer, on a server with an event log", errBadRequest)
	}
	i := strings.LastIndexByte(id, '/')
	n, perr := strconv.ParseInt(id[i+1:], 10, 64)
	if i <= 0 || perr != nil || n < 0 || !sessionID.MatchString(id[:i]) {
		return "", 0, false, fmt.Errorf("%w: Last-Event-ID %q is not an event of this API's streams (RUN/N)", errBadRequest, id)
	}
	run = id[:i]
	if err := s.findRun(r.Context(), userOf(r), run); err != nil {
		return "", 0, false, err
	}
	return run, n, true, nil
}

// beginOrResume is begin for a request that starts a run, and, for one
// that resumes a streamed answer (Last-Event-ID), the run it resumes and
// the number of the last event its client had (-1 when starting).
func (s *Server) beginOrResume(r *http.Request, model string, msgs []inMessage, refused error, stream bool) (prompt string, opts *runner.Options, last int64, resume bool, err error) {
	run, last, resume, err := s.resumeOf(r, stream)
	switch {
	case err != nil:
		return "", nil, 0, false, err
	case refused != nil:
		return "", nil, 0, false, refused
	case resume:
		return "", &runner.Options{RunID: run}, last, true, nil
	}
	prompt, opts, err = s.begin(r, model, msgs, nil)
	return prompt, opts, -1, false, err
}

// newStream starts the streamed answer of run, numbered when it can be
// resumed (see stream), without the events up to last, which the client
// has.
func (s *Server) newStream(w http.ResponseWriter, rn runner.Runner, run string, last int64) *sse {
	ev := newSSE(w)
	if _, ok := rn.(runner.Submitter); ok && s.opts.Log != nil {
		ev.run, ev.skip = run, last
	}
	return ev
}

// watchStart watches the start of run, an agent's run just started: the
// returned context ends, with agent.ErrNotServed as its cause, when after
// the start timeout no event of the run but its input was seen (seen is
// told each event) and no process serves the agent; stop ends the watch.
// A run that no process takes up fails so, as a request that waits for
// its answer does.
func (s *Server) watchStart(ctx context.Context, rn runner.Runner, run string) (wctx context.Context, seen func(*calf.Message), stop func()) {
	wctx, cancel := context.WithCancelCause(ctx)
	var taken atomic.Bool
	check := time.AfterFunc(agent.DefaultStartTimeout, func() {
		if !taken.Load() && s.notServed(context.WithoutCancel(ctx), rn, run) {
			cancel(agent.ErrNotServed)
		}
	})
	seen = func(m *calf.Message) {
		if !strings.HasSuffix(m.Channel, ".input") {
			taken.Store(true)
		}
	}
	return wctx, seen, func() { check.Stop(); cancel(nil) }
}

// notServedError returns, when wctx (from watchStart) ended because no
// process serves rn, the error that says so, having cancelled the run;
// nil otherwise.
func (s *Server) notServedError(ctx, wctx context.Context, rn runner.Runner, run string) error {
	if ctx.Err() != nil || !errors.Is(context.Cause(wctx), agent.ErrNotServed) {
		return nil
	}
	_ = rn.Cancel(context.WithoutCancel(ctx), s.rt, run, "no process serves "+rn.Name())
	return fmt.Errorf("%w %s: nothing took the run up within %s; start a worker that serves it (calf worker)", agent.ErrNotServed, rn.Name(), agent.DefaultStartTimeout)
}

// notServed reports whether the run of rn has not started and no process
// consumes the agent's input channel.
func (s *Server) notServed(ctx context.Context, rn runner.Runner, run string) bool {
	if _, err := rn.Status(ctx, s.rt, run); !errors.Is(err, store.ErrNotFound) {
		return false // started, or the store cannot tell
	}
	input := runner.InputChannel(rn)
	if input == "" {
		return false
	}
	n, known, err := calf.GroupMembers(ctx, s.rt.Client().Broker(), input)
	return err == nil && known && n == 0
}

// stream is the streamed answer of a request: the run, its events, its
// end. With an event log and a runner that starts runs without waiting
// ([runner.Submitter]), the run is started and its events are read from the
// log, numbered, so that the same stream can be produced again for a
// client that resumes it (resume set: the run is not started again, and
// the events the client had are not written). Otherwise the run is run
// as the request's own.
func (s *Server) stream(r *http.Request, rn runner.Runner, prompt string, opts *runner.Options, ev *sse, resume bool, progress func(runner.Progress)) (*runner.Result, error) {
	st, ok := rn.(runner.Submitter)
	if s.opts.Log == nil || !ok {
		return rn.Run(r.Context(), s.rt, prompt, opts, progress)
	}
	return s.follow(r, rn, st, prompt, opts, ev, resume, progress, false)
}

// await is the answer of a request that does not stream: the run, and its
// end. With an event log and a runner that starts runs without waiting,
// the run is started and followed in its log, and a run that parks on an
// approval ends the wait at once with an *approvalPendingError (the run
// stays parked, for the approval's answer); otherwise the run is run as
// the request's own.
func (s *Server) await(r *http.Request, rn runner.Runner, prompt string, opts *runner.Options) (*runner.Result, error) {
	st, ok := rn.(runner.Submitter)
	if s.opts.Log == nil || !ok {
		return rn.Run(r.Context(), s.rt, prompt, opts, nil)
	}
	return s.follow(r, rn, st, prompt, opts, nil, false, func(runner.Progress) {}, true)
}

// approvalPendingError ends the wait of a request whose run parked on
// approval requests: answered 409 approval_pending, with the run, the
// requests, and how to answer them.
type approvalPendingError = httperr.ApprovalPendingError

// follow is stream and await with a runner that starts runs and an event
// log: heartbeats on ev when not nil, and, with park, an end at the first
// approval request of the run (or of a run it started) still pending.
func (s *Server) follow(r *http.Request, rn runner.Runner, st runner.Submitter, prompt string, opts *runner.Options, ev *sse, resume bool, progress func(runner.Progress), park bool) (*runner.Result, error) {
	ctx := r.Context()
	run := opts.RunID
	if !resume {
		if _, err := st.Submit(context.WithoutCancel(ctx), s.rt, prompt, opts); err != nil {
			return nil, err
		}
	}
	if !strings.EqualFold(r.Header.Get(OnDisconnectHeader), "continue") {
		stop := context.AfterFunc(ctx, func() {
			_ = rn.Cancel(context.WithoutCancel(ctx), s.rt, run, "the client went away")
		})
		defer stop()
	}
	fctx, seen := ctx, func(*calf.Message) {}
	if !resume {
		var stop func()
		fctx, seen, stop = s.watchStart(ctx, rn, run)
		defer stop()
	}
	done := make(chan struct{})
	defer close(done)
	if ev != nil {
		go s.heartbeats(ev, done)
	}
	watch := run
	// The run's status in the store has no usage: the output event has.
	var usage model.Usage
	for e, err := range s.opts.Log.FollowRun(fctx, run, 0) {
		if err != nil {
			if nerr := s.notServedError(ctx, fctx, rn, run); nerr != nil {
				return nil, nerr
			}
			return nil, err
		}
		seen(e.Message)
		if park {
			pending, err := s.parked(ctx, run, e)
			if err != nil {
				return nil, err
			}
			if pending != nil {
				return nil, pending
			}
		}
		// The run's own events (and those of the runs it handed off to),
		// not its subagents'.
		if m := e.Message; m.Metadata.RunID == watch {
			if aev, err := agent.DecodeEvent(m); err == nil {
				if p, ok := runner.ProgressOf(aev); ok {
					progress(p)
				}
				if aev.Kind == agent.EventOutput {
					usage = aev.Output.Usage
				}
			}
		}
		_, watch = eventlog.Ended(e, watch)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// The log has the output: the store has the run's end, or soon.
	for wait := 10 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		res, err := rn.Status(ctx, s.rt, run)
		if err != nil || res.Status != runner.Running {
			if res != nil {
				res.Usage = usage
			}
			return res, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
	}
}

// heartbeats writes comments on ev until done is closed, so that the
// connection stays open while the run waits.
func (s *Server) heartbeats(ev *sse, done <-chan struct{}) {
	t := time.NewTicker(heartbeat)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			if ev.comment("ping") != nil {
				return
			}
		case <-done:
			return
		}
	}
}

// parked returns, when e is an approval request of run (or of a run it
// started) and run has requests still pending, the error that says so.
func (s *Server) parked(ctx context.Context, run string, e eventlog.Event) (*approvalPendingError, error) {
	aev, err := agent.DecodeEvent(e.Message)
	if err != nil || aev.Kind != agent.EventApproval || aev.Approval.Status != approval.Pending {
		return nil, nil
	}
	pending, err := approval.List(ctx, s.rt.Store(), run, approval.Pending)
	if err != nil || len(pending) == 0 {
		return nil, err // answered already: the run goes on
	}
	return &approvalPendingError{RunID: run, Approvals: pending}, nil
}
