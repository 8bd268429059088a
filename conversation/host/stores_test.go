package host_test

import (
	"testing"

	"github.com/calf-go/calf/internal/teststores"
	"github.com/calf-go/calf/store"
)

// stores returns a new, empty store of each kind the tests run on: memory,
// SQLite and PostgreSQL (see package teststores).
func stores() map[string]func(t testing.TB) store.Store {
	return teststores.Open("conv", teststores.Memory, teststores.SQLite, teststores.Postgres)
}

// eachStore runs f on a new store of each kind.
func eachStore(t *testing.T, f func(t *testing.T, s store.Store)) {
	for name, open := range stores() {
		t.Run(name, func(t *testing.T) { f(t, open(t)) })
	}
}
