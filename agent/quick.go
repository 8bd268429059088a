package agent

import (
	"context"
	"errors"
	"fmt"
	"sync"

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

// servedOn records the runtimes the agent was served on.
type servedOn struct {
	mu sync.Mutex // held while the agent is served
	on map[*Runtime]bool
}

// add records rt; the caller holds mu.
func (s *servedOn) add(rt *Runtime) {
	if s.on == nil {
		s.on = map[*Runtime]bool{}
	}
	s.on[rt] = true
}

// onDemand returns rt with the agent served on it in this process when rt
// serves on demand ([RuntimeOptions.ServeOnDemand]; once: not again if
// [Agent.Serve] served it there), or an error matching [ErrNoRuntime]
// when rt is nil.
func (a *Agent[Out]) onDemand(ctx context.Context, rt *Runtime) (*Runtime, error) {
	if rt == nil {
		return nil, ErrNoRuntime
	}
	if !rt.serveOnDemand {
		return rt, nil
	}
	a.served.mu.Lock()
	defer a.served.mu.Unlock()
	if a.served.on[rt] {
		return rt, nil
	}
	// The handlers live as long as the runtime's client: not bound to the
	// context of the first run.
	if err := a.serve(context.WithoutCancel(ctx), rt, nil); err != nil {
		return nil, fmt.Errorf("agent %s: serve on demand: %w", a.name, err)
	}
	a.served.add(rt)
	return rt, nil
}
