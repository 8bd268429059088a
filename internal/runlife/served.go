package runlife

import (
	"context"
	"sync"
)

// Served records the runtimes (of type K) a runner is served on in this
// process, so that serving it on demand serves it once per runtime, and
// not again where it was served explicitly. The zero value is ready.
type Served[K comparable] struct {
	mu sync.Mutex // held while the runner is served
	on map[K]bool
}

// Serve calls serve, with the runner's lock held, and records rt once it
// succeeds: an explicit Serve serves again each time it is called.
func (s *Served[K]) Serve(rt K, serve func() error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := serve(); err != nil {
		return err
	}
	s.add(rt)
	return nil
}

// Once calls serve, with the runner's lock held, unless the runner is
// served on rt already, and reports whether it served it now. serve is
// given ctx without its cancellation: the handlers it starts live as long
// as the runtime's client, not bound to the context of the first run,
// which served them on demand.
func (s *Served[K]) Once(ctx context.Context, rt K, serve func(ctx context.Context) error) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.on[rt] {
		return false, nil
	}
	if err := serve(context.WithoutCancel(ctx)); err != nil {
		return false, err
	}
	s.add(rt)
	return true, nil
}

// On reports whether the runner is served on rt.
func (s *Served[K]) On(rt K) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.on[rt]
}

func (s *Served[K]) add(rt K) {
	if s.on == nil {
		s.on = map[K]bool{}
	}
	s.on[rt] = true
}
