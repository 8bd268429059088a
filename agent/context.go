package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync/atomic"

	"github.com/calf-go/calf/tool"
)

// RunContext is what an agent's tools and dynamic instructions see of the
// run: where it stands and, through a [Deps] handle, its dependencies. It
// is a [context.Context] carrying the handler's deadline and
// cancellation.
type RunContext struct {
	context.Context
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
	// deps are the run's dependencies, nil when it has none.
	deps *runDeps
}

// runDeps are a run's dependencies as a handler has them: the worker's
// own (ServeOptions.LocalDeps), or else the JSON that travelled with the
// run, decoded by [Deps.Of] into the type it asks for.
type runDeps struct {
	local *DepsValue
	raw   json.RawMessage
}

// Deps is the typed handle of dependencies of type D: the one place that
// names their type. The code that gives a run its dependencies
// ([Deps.Value], for [RunOptions.Deps] or [ServeOptions.LocalDeps]) and
// the tools and instructions that read them ([Deps.Of]) share the handle,
// so that giving a value of another type does not compile. Its zero value
// is ready to use; declare one per type of dependencies:
//
//	var shopDeps agent.Deps[Shop]
//
//	opts := &agent.RunOptions{Deps: shopDeps.Value(Shop{Currency: "EUR"})}
//	// in a tool made by NewTool:
//	shop, err := shopDeps.Of(rc)
type Deps[D any] struct{}

// Value wraps d as a run's dependencies.
func (Deps[D]) Value(d D) DepsValue { return DepsValue{v: d, set: true} }

// Of returns the run's dependencies: those the serving process gives
// ([ServeOptions.LocalDeps]), or else those that travelled with the run,
// decoded from JSON. A run given none has the zero D. The error says that
// the run's dependencies are not a D (they were given through another
// handle) or do not decode as one.
func (Deps[D]) Of(rc RunContext) (D, error) {
	var d D
	if rc.deps == nil {
		return d, nil
	}
	if l := rc.deps.local; l != nil {
		v, ok := l.v.(D)
		if !ok {
			return d, fmt.Errorf("agent: the dependencies given by ServeOptions.LocalDeps are a %T, not a %v", l.v, reflect.TypeFor[D]())
		}
		return v, nil
	}
	if len(rc.deps.raw) == 0 {
		return d, nil
	}
	if err := json.Unmarshal(rc.deps.raw, &d); err != nil {
		return d, fmt.Errorf("agent: decode the run's dependencies as a %v: %v", reflect.TypeFor[D](), err)
	}
	return d, nil
}

// DepsValue is a value of dependencies made by [Deps.Value]. Its zero
// value is none.
type DepsValue struct {
	v   any
	set bool
}

// isZero reports whether the value holds no dependencies, or the zero
// value of their type.
func (v DepsValue) isZero() bool {
	return !v.set || v.v == nil || reflect.ValueOf(v.v).IsZero()
}

type runContextKey struct{}

// FromContext returns the [RunContext] of the tool call that ctx belongs
// to. A tool made with [tool.New] uses it to reach the run and its
// dependencies. It reports false outside a tool call of an agent.
func FromContext(ctx context.Context) (RunContext, bool) {
	rc, ok := ctx.Value(runContextKey{}).(RunContext)
	if ok {
		rc.Context = ctx
	}
	return rc, ok
}

// NewTool returns a typed tool whose function receives the run's
// [RunContext]. The arguments' JSON Schema is inferred from In, as in
// [tool.New].
func NewTool[In, Out any](name, description string, fn func(rc RunContext, in In) (Out, error)) (tool.Tool, error) {
	return tool.New(name, description, func(ctx context.Context, in In) (Out, error) {
		rc, ok := FromContext(ctx)
		if !ok {
			var zero Out
			return zero, errors.New("agent: tool called outside an agent run")
		}
		return fn(rc, in)
	})
}
