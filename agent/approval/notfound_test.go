package approval_test

import (
	"context"
	"errors"
	"testing"

	"github.com/calf-go/calf/agent/approval"
	"github.com/calf-go/calf/store"
	storemem "github.com/calf-go/calf/store/memory"
)

// TestNotFoundIsStoreNotFound: an unknown request's error matches both
// approval.ErrNotFound and store.ErrNotFound, so that one test tells
// "not found" across packages (and the HTTP edge answers 404).
func TestNotFoundIsStoreNotFound(t *testing.T) {
	_, err := approval.Get(context.Background(), storemem.New(), "no-such-request")
	if !errors.Is(err, approval.ErrNotFound) || !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get of an unknown id: %v; want an error matching approval.ErrNotFound and store.ErrNotFound", err)
	}
}
