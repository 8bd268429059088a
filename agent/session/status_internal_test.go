package session

import (
	"testing"

	"github.com/calf-go/calf/agent/internal/sessionstore"
)

// The statuses are those the core says.
func TestStatusesOfTheCore(t *testing.T) {
	for got, want := range map[Status]string{Idle: sessionstore.StatusIdle, Running: sessionstore.StatusRunning, Paused: sessionstore.StatusPaused} {
		if string(got) != want {
			t.Errorf("status %q, the core's %q", got, want)
		}
	}
}
