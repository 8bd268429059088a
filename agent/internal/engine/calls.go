package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/tool"
)

// ErrTimedOut is returned by [CallWithin] when the timeout passed first.
var ErrTimedOut = errors.New("timed out")

// CallWithin calls fn with a context bounded by timeout, in a goroutine of
// its own, so that a function that ignores its context holds the caller no
// longer than the timeout; a panic becomes an error. It returns
// [ErrTimedOut] when the timeout passed first, and ctx's error when ctx
// ended first. Hooks and guardrails are called so.
func CallWithin[T any](ctx context.Context, timeout time.Duration, fn func(context.Context) (T, error)) (T, error) {
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	type answer struct {
		v   T
		err error
	}
	done := make(chan answer, 1)
	go func() {
		var a answer
		defer func() {
			if v := recover(); v != nil {
				a = answer{err: fmt.Errorf("panicked: %v\n%s", v, debug.Stack())}
			}
			done <- a
		}()
		a.v, a.err = fn(tctx)
	}()
	select {
	case a := <-done:
		return a.v, a.err
	case <-tctx.Done():
		var zero T
		if ctx.Err() != nil {
			return zero, ctx.Err()
		}
		return zero, ErrTimedOut
	}
}

// A ToolCall is one call of a tool, for [Executor.Call].
type ToolCall struct {
	Tool      tool.Tool
	Arguments json.RawMessage
	// Agent and Name, the agent's and the tool's, name the call in the log.
	Agent, Name string
	// Log receives the panic of a tool, with its stack.
	Log *slog.Logger
}

// ToolReturn is what a tool's Call returned.
type ToolReturn struct {
	Out *tool.Result
	Err error
}

// Call calls the tool of c with ctx, which bounds it by the call's
// timeout, on a goroutine of e, and waits for it until ctx ends. A tool
// that panics returns an error that says so, its stack logged. When ctx
// ends before the tool returns, Call returns ctx's error at once with
// late: the call is left to finish on its own, and late receives what it
// returns then, for the caller to drop; late is nil otherwise.
func (e *Executor) Call(ctx context.Context, c ToolCall) (r ToolReturn, late <-chan ToolReturn) {
	done := make(chan ToolReturn, 1)
	e.Run(func() {
		var r ToolReturn
		defer func() {
			if v := recover(); v != nil {
				c.Log.Error("agent: tool panicked", "agent", c.Agent, "tool", c.Name, "panic", v, "stack", string(debug.Stack()))
				r = ToolReturn{Err: fmt.Errorf("tool %q panicked: %v", c.Name, v)}
			}
			done <- r
		}()
		r.Out, r.Err = c.Tool.Call(ctx, c.Arguments)
	})
	select {
	case r = <-done:
		return r, nil
	case <-ctx.Done():
		select {
		case r = <-done: // it returned at the deadline, probably with ctx's error
			return r, nil
		default:
			return ToolReturn{Err: ctx.Err()}, done
		}
	}
}

// CallModel calls m with req, bounded by timeout. With delta set, it
// streams the response, handing each delta to delta with the number of
// deltas that went out before it; delta reports whether this one went out
// (one that fails to go out is skipped, not counted: what follows the step
// waits only for those emitted). It returns the response and the number
// of deltas that went out. Its error says whether the call failed or timed
// out; ctx's end is a failure.
func CallModel(ctx context.Context, m model.Model, req *model.Request, timeout time.Duration, delta func(n int, d model.Delta) bool) (*model.Response, int, error) {
	mctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var resp *model.Response
	var err error
	n := 0 // deltas that went out
	if delta != nil {
		for chunk, cerr := range model.Stream(mctx, m, req) {
			if cerr != nil {
				err = cerr
				break
			}
			if chunk.Delta != nil && delta(n, *chunk.Delta) {
				n++
			}
			if chunk.Response != nil {
				resp = chunk.Response
			}
		}
		if err == nil && resp == nil {
			err = errors.New("stream ended without a response")
		}
	} else {
		resp, err = m.Generate(mctx, req)
	}
	if err != nil {
		if ctx.Err() == nil && mctx.Err() != nil {
			return nil, n, fmt.Errorf("model call timed out after %s: %w", timeout, err)
		}
		return nil, n, fmt.Errorf("model call failed: %w", err)
	}
	return resp, n, nil
}
