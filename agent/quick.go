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
// instructions and tools given: the agent of most programs. Use [New]
// for more options.
func NewText(name string, m model.Model, instructions string, tools ...tool.Tool) (*Agent[string], error) {
	return New(name, m, &Options{Instructions: instructions, Tools: tools})
}

var (
	defaultOnce sync.Once
	defaultRT   *Runtime
)

// DefaultRuntime returns the runtime that the functions and methods of
// agents, teams and workflows that take a *Runtime (Serve, Run,
// RunStream, Submit, Wait, Result, Recover, ...) use when given a nil one:
// one per process, made on first use, on an in-process broker and an
// in-memory store. Nothing of it
// outlives the process: give a runtime of your own, on a durable store
// (store/sqlite, store/postgres) and a broker that other processes share,
// for runs that must survive a restart or spread over workers.
func DefaultRuntime() *Runtime {
	defaultOnce.Do(func() {
		defaultRT = NewRuntime(calf.NewClient(memory.New(nil), nil), storemem.New(), nil)
	})
	return defaultRT
}

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

// local returns rt, or, when rt is nil, the default runtime with the agent
// served on it in this process (once: not again if [Agent.Serve] served
// it there).
func (a *Agent[Out]) local(ctx context.Context, rt *Runtime) (*Runtime, error) {
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
	if err := a.serve(context.WithoutCancel(ctx), rt, nil); err != nil {
		return nil, fmt.Errorf("agent %s: serve on the default runtime: %w", a.name, err)
	}
	a.served.add(rt)
	return rt, nil
}
