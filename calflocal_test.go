package calf_test

import (
	"testing"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/broker/brokertest"
	"github.com/calf-go/calf/broker/memory"
)

// IsLocal is true of the in-process broker and of wrappers that say what
// they wrap, false of a broker that does not say it is local.
func TestIsLocal(t *testing.T) {
	b := memory.New(nil)
	t.Cleanup(func() { _ = b.Close() })
	for name, tc := range map[string]struct {
		b    calf.Broker
		want bool
	}{
		"memory":         {b, true},
		"duplicating":    {brokertest.DuplicateDeliveries(brokertest.DuplicatePublishes(b, 2), 2), true},
		"opaque wrapper": {struct{ calf.Broker }{b}, false},
		"nil":            {nil, false},
	} {
		if got := calf.IsLocal(tc.b); got != tc.want {
			t.Errorf("%s: IsLocal = %v, want %v", name, got, tc.want)
		}
	}
}
