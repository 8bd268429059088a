package adapter_test

import (
	"context"
	"errors"
	"testing"

	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/store/adapter"
)

func TestGuard(t *testing.T) {
	g := &adapter.Guard{Name: "test"}
	ctx, cancel := context.WithCancel(t.Context())
	if err := g.Check(ctx, "k", "id"); err != nil {
		t.Errorf("Check on an open store = %v", err)
	}
	if err := g.Check(ctx, "", "id"); !errors.Is(err, store.ErrInvalidKey) {
		t.Errorf("Check of an empty kind = %v, want ErrInvalidKey", err)
	}
	dbErr := errors.New("connection reset")
	if err := g.Fail(ctx, "get k/id", dbErr); !errors.Is(err, dbErr) || err.Error() != "test: get k/id: connection reset" {
		t.Errorf("Fail = %v", err)
	}
	cancel()
	if err := g.Live(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Live with a done ctx = %v", err)
	}
	// A done ctx, not what the database made of it.
	if err := g.Fail(ctx, "get k/id", dbErr); !errors.Is(err, context.Canceled) || errors.Is(err, dbErr) {
		t.Errorf("Fail with a done ctx = %v, want context.Canceled", err)
	}
	g.Close()
	if !g.Closed() {
		t.Error("Closed = false after Close")
	}
	for _, err := range []error{g.Live(t.Context()), g.Check(t.Context(), "k", "id"), g.Fail(t.Context(), "put", dbErr)} {
		if !errors.Is(err, store.ErrClosed) {
			t.Errorf("after Close: %v, want ErrClosed", err)
		}
	}
}
