package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync/atomic"
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
//	// in a tool made by tool.New, from the context it is called with:
//	shop, err := shopDeps.Of(ctx)
type Deps[D any] struct{}

// Value wraps d as a run's dependencies.
func (Deps[D]) Value(d D) DepsValue { return DepsValue{v: d, set: true} }

// Of returns the run's dependencies: those the serving process gives
// ([ServeOptions.LocalDeps]), or else those that travelled with the run,
// decoded from JSON. A run given none has the zero D. ctx is the run's:
// the [RunContext] that dynamic instructions get, or the context a tool is
// called with ([FromContext]). The error says that ctx belongs to no agent
// run, or that the run's dependencies are not a D (they were given through
// another handle) or do not decode as one.
func (Deps[D]) Of(ctx context.Context) (D, error) {
	var d D
	rc, ok := ctx.(RunContext)
	if !ok {
		if rc, ok = FromContext(ctx); !ok {
			return d, errors.New("agent: dependencies read outside an agent run")
		}
	}
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
// to: a tool made with [github.com/calf-go/calf/tool.New] reaches its run through the context it
// is called with (its dependencies also through [Deps.Of] of that
// context). It reports false outside a tool call of an agent.
func FromContext(ctx context.Context) (RunContext, bool) {
	rc, ok := ctx.Value(runContextKey{}).(RunContext)
	if ok {
		rc.Context = ctx
	}
	return rc, ok
}
