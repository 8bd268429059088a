package agent

import (
	"context"
	"errors"
	"fmt"

	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/tool"
)

// NewText returns an agent named name that answers in text, with the
// instructions and tools given: the agent of most programs. Use [New]
// for more options.
func NewText(name string, m model.Model, instructions string, tools ...tool.Tool) (*Agent[string], error) {
	return New(name, m, &Options{Instructions: instructions, Tools: tools})
}

// ErrNoRuntime is the error of every function and method of agents,
// teams and workflows given a nil *Runtime: a runtime is always given,
// and none is assumed.
var ErrNoRuntime = errors.New("agent: no runtime: pass local.Runtime() for one in this process, or agent.NewRuntime over a broker and a store")

// onDemand returns rt with the agent served on it in this process when rt
// serves on demand ([RuntimeOptions.ServeOnDemand]; once: not again if
// [Agent.Serve] served it there), with every agent its runs may delegate
// to (see [Agent.delegates]), or an error matching [ErrNoRuntime] when rt
// is nil.
func (a *Agent[Out]) onDemand(ctx context.Context, rt *Runtime) (*Runtime, error) {
	if rt == nil {
		return nil, ErrNoRuntime
	}
	if !rt.serveOnDemand {
		return rt, nil
	}
	first, err := a.serveOnce(ctx, rt)
	if err != nil {
		return nil, err
	}
	if first {
		if err := serveDelegates(ctx, rt, a); err != nil {
			return nil, err
		}
	}
	return rt, nil
}

// serveOnce serves the agent on rt unless it is served there already,
// and reports whether it served it now.
func (a *Agent[Out]) serveOnce(ctx context.Context, rt *Runtime) (bool, error) {
	first, err := a.served.Once(ctx, rt, func(ctx context.Context) error { return a.serve(ctx, rt, nil) })
	if err != nil {
		return false, fmt.Errorf("agent %s: serve on demand: %w", a.name, err)
	}
	return first, nil
}

// delegator is an agent of this process whose runs may start runs of
// other agents (handoff targets, subagents), which a runtime that serves
// on demand serves with it.
type delegator interface {
	Target
	serveOnce(ctx context.Context, rt *Runtime) (bool, error)
	delegates() []Target
}

// serveDelegates serves on rt, which serves on demand, every agent of
// this process that a run of from may reach through handoffs and
// subagent tools, directly or through the agents it reaches: a run that
// hands off or delegates on the quick path never waits for an agent no
// process serves. Targets known by name only ([Named]) are served
// elsewhere, or not at all: their runs fail with [ErrNotServed].
func serveDelegates(ctx context.Context, rt *Runtime, from delegator) error {
	seen := map[delegator]bool{from: true}
	queue := from.delegates()
	for len(queue) > 0 {
		t := queue[0]
		queue = queue[1:]
		d, ok := t.(delegator)
		if !ok || seen[d] {
			continue
		}
		seen[d] = true
		if _, err := d.serveOnce(ctx, rt); err != nil {
			return fmt.Errorf("agent %s: serve %s, which its runs may delegate to: %w", from.Name(), d.Name(), err)
		}
		queue = append(queue, d.delegates()...)
	}
	return nil
}

// delegates lists the agents a run of a may start runs of: the targets of
// its handoff tools and of its subagent tools.
func (a *Agent[Out]) delegates() []Target {
	a.mu.RLock()
	defer a.mu.RUnlock()
	var out []Target
	for _, name := range a.tools.Names() {
		t, ok := a.tools.Get(name)
		if !ok {
			continue
		}
		switch t := t.(type) {
		case *handoffTool:
			out = append(out, t.target)
		case *subagentTool:
			out = append(out, t.targets...)
		}
	}
	return out
}
