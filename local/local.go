package local

import (
	"sync"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/memory"
	storemem "github.com/calf-go/calf/store/memory"
)

var (
	once    sync.Once
	process *agent.Runtime
)

// Runtime returns the runtime of this process: one per process, made on
// first use by New(nil). It serves agents, teams and workflows on demand.
// It is never shut down.
func Runtime() *agent.Runtime {
	once.Do(func() { process = New(nil) })
	return process
}

// Options configures [New]. A nil *Options means the defaults.
type Options struct {
	// Broker configures the in-process broker (attempts, backoff, queue
	// size, ...). Default: the broker's defaults.
	Broker *memory.Options
	// Runtime configures the runtime (logger, clock, ids, prices,
	// telemetry). Its ServeOnDemand is not read: the runtime always
	// serves on demand. Default: the runtime's defaults.
	Runtime *agent.RuntimeOptions
}

// New returns a new runtime on a new in-process broker and a new
// in-memory store, which serves agents, teams and workflows on demand
// ([agent.RuntimeOptions.ServeOnDemand]). It shares nothing with
// [Runtime] or other runtimes made by New. Close its broker
// (rt.Client().Broker().Close()) to stop the handlers it serves.
func New(opts *Options) *agent.Runtime {
	var o Options
	if opts != nil {
		o = *opts
	}
	var ro agent.RuntimeOptions
	if o.Runtime != nil {
		ro = *o.Runtime
	}
	ro.ServeOnDemand = true
	return agent.NewRuntime(calf.NewClient(memory.New(o.Broker), nil), storemem.New(), &ro)
}
