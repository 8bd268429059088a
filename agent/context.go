package agent

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/calf-go/calf/tool"
)

// RunContext is what an agent's tools and dynamic instructions see of the
// run: its dependencies and where it stands. It is a [context.Context]
// carrying the handler's deadline and cancellation.
type RunContext[Deps any] struct {
	context.Context
	// Deps are the run's dependencies: those given by the worker at Serve
	// (process-local), or else those that travelled with the run.
	Deps Deps
	// Agent is the agent's name.
	Agent string
	// RunID identifies the run.
	RunID string
	// SessionID is the conversation the run continues, if any.
	SessionID string
	// Step is the model call the run is at, from 1.
	Step int
	// ToolCallID identifies the tool call being executed; it is empty in
	// instructions. Use it as the idempotency key of a tool's side effects:
	// a tool may be executed again if its worker crashes before the result
	// is recorded.
	ToolCallID string

	rt *Runtime
	// seq counts the events emitted with EmitEvent.
	seq *atomic.Int64
}

// Emit publishes data on channel as an event of this run: it carries the
// run's correlation id and is caused by the event being handled.
func (rc RunContext[Deps]) Emit(channel string, data any) error {
	if rc.rt == nil {
		return errors.New("agent: run context has no runtime")
	}
	_, err := rc.rt.client.Emit(rc.Context, channel, data)
	return err
}

type runContextKey struct{}

// FromContext returns the [RunContext] of the tool call that ctx belongs
// to. A tool made with [tool.New] uses it to reach the agent's typed
// dependencies. It reports false outside a tool call of an agent whose
// dependencies have type Deps.
func FromContext[Deps any](ctx context.Context) (RunContext[Deps], bool) {
	rc, ok := ctx.Value(runContextKey{}).(RunContext[Deps])
	if ok {
		rc.Context = ctx
	}
	return rc, ok
}

// NewTool returns a typed tool whose function receives the run's
// [RunContext]. The arguments' JSON Schema is inferred from In, as in
// [tool.New].
func NewTool[Deps, In, Out any](name, description string, fn func(rc RunContext[Deps], in In) (Out, error)) (tool.Tool, error) {
	return tool.New(name, description, func(ctx context.Context, in In) (Out, error) {
		rc, ok := FromContext[Deps](ctx)
		if !ok {
			var zero Out
			return zero, errors.New("agent: tool called outside an agent run with these dependencies")
		}
		return fn(rc, in)
	})
}
