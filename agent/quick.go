package agent

import (
	"context"
	"fmt"
	"sync"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/model"
	storemem "github.com/calf-go/calf/store/memory"
	"github.com/calf-go/calf/tool"
)

// NewText returns an agent named name that answers in text, with the
// instructions and tools given: the agent of most programs, with no
// dependencies and no output type ([Agent][NoDeps, string]). Use [New]
// for more options.
func NewText(name string, m model.Model, instructions string, tools ...tool.Tool) (*Agent[NoDeps, string], error) {
	return New[NoDeps, string](name, m, &Options[NoDeps]{Instructions: instructions, Tools: tools})
}

var (
	defaultOnce sync.Once
	defaultRT   *Runtime
)

// DefaultRuntime returns the runtime that Run, RunStream, Submit and
// Result use when given a nil *Runtime: one per process, made on first
// use, on an in-process broker and an in-memory store. Nothing of it
// outlives the process: give a runtime of your own, on a durable store
// (store/sqlite, store/postgres) and a broker that other processes share,
// for runs that must survive a restart or spread over workers.
func DefaultRuntime() *Runtime {
	defaultOnce.Do(func() {
		defaultRT = NewRuntime(calf.NewClient(memory.New(nil), nil), storemem.New(), nil)
	})
	return defaultRT
}

// served records the runtimes the agent was served on by [Agent.local].
type servedOn struct {
	mu sync.Mutex
	on map[*Runtime]bool
}

// local returns rt, or, when rt is nil, the default runtime with the agent
// served on it in this process (once).
func (a *Agent[Deps, Out]) local(ctx context.Context, rt *Runtime) (*Runtime, error) {
	if rt != nil {
		return rt, nil
	}
	rt = DefaultRuntime()
	a.served.mu.Lock()
	defer a.served.mu.Unlock()
	if a.served.on[rt] {
		return rt, nil
	}
	// The handlers live as long as the runtime's client: not bound to the
	// context of the first run.
	if err := a.Serve(context.WithoutCancel(ctx), rt, nil); err != nil {
		return nil, fmt.Errorf("agent %s: serve on the default runtime: %w", a.name, err)
	}
	if a.served.on == nil {
		a.served.on = map[*Runtime]bool{}
	}
	a.served.on[rt] = true
	return rt, nil
}
