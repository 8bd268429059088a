package deadletter_test

import (
	"context"
	"errors"
	"testing"

	"github.com/calf-go/calf/deadletter"
	"github.com/calf-go/calf/store"
	storememory "github.com/calf-go/calf/store/memory"
)

// TestNotFoundIsStoreNotFound: an unknown dead letter's error matches both
// deadletter.ErrNotFound and store.ErrNotFound.
func TestNotFoundIsStoreNotFound(t *testing.T) {
	_, err := deadletter.Get(context.Background(), storememory.New(), "no-such-letter")
	if !errors.Is(err, deadletter.ErrNotFound) || !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get of an unknown id: %v; want an error matching deadletter.ErrNotFound and store.ErrNotFound", err)
	}
}
