package runlife_test

import (
	"context"
	"errors"
	"testing"

	"github.com/calf-go/calf/internal/runlife"
)

func TestServedOnce(t *testing.T) {
	var s runlife.Served[string]
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	calls := 0
	serve := func(ctx context.Context) error {
		calls++
		if ctx.Err() != nil {
			t.Errorf("served on demand with a context that ends with the first run's: %v", ctx.Err())
		}
		return nil
	}
	// Failed, it is not recorded.
	if first, err := s.Once(ctx, "rt", func(context.Context) error { return errors.New("no") }); err == nil || first {
		t.Errorf("a failed serve: first %v, %v", first, err)
	}
	if s.On("rt") {
		t.Error("a failed serve was recorded")
	}
	if first, err := s.Once(ctx, "rt", serve); err != nil || !first {
		t.Errorf("first serve on demand: first %v, %v", first, err)
	}
	if first, err := s.Once(ctx, "rt", serve); err != nil || first {
		t.Errorf("second serve on demand: first %v, %v", first, err)
	}
	if calls != 1 || !s.On("rt") || s.On("other") {
		t.Errorf("served %d times; on rt %v, on other %v", calls, s.On("rt"), s.On("other"))
	}
	// An explicit Serve serves again each time.
	if err := s.Serve("rt", func() error { calls++; return nil }); err != nil || calls != 2 {
		t.Errorf("explicit serve: %d calls, %v", calls, err)
	}
}
