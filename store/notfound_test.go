package store_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/calf-go/calf/store"
)

func TestNotFoundMatchesErrNotFound(t *testing.T) {
	a, b := store.NotFound("pkg: no such thing"), store.NotFound("pkg: no such thing")
	wrapped := fmt.Errorf("%w: id 7", a)
	if !errors.Is(wrapped, store.ErrNotFound) || !errors.Is(wrapped, a) {
		t.Errorf("%v: matches store.ErrNotFound %t, its own sentinel %t; want both", wrapped, errors.Is(wrapped, store.ErrNotFound), errors.Is(wrapped, a))
	}
	if errors.Is(a, b) || errors.Is(fmt.Errorf("load: %w", store.ErrNotFound), a) {
		t.Error("two packages' not-found errors match each other, or a store's not-found error matches a package's")
	}
	if a.Error() != "pkg: no such thing" {
		t.Errorf("Error() = %q", a.Error())
	}
}
