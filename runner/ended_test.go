package runner

import (
	"context"
	"errors"
	"testing"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
)

// TestParkedRunIsNotFailed checks that a run held up by a parked message
// is reported as such, not as a failed run: the HTTP edge answers it 409
// run_parked (replay the dead letter), not 500.
func TestParkedRunIsNotFailed(t *testing.T) {
	parked := &agent.RunError{RunRef: agent.RunRef{Kind: "agent", Name: "a", RunID: "r1"}, Status: agent.RunRunning,
		Parked: &calf.DeadLetter{Error: "poison"}}
	res, err := ended(context.Background(), "r1", parked)
	if res != nil || !errors.Is(err, agent.ErrRunParked) {
		t.Fatalf("ended(parked) = %+v, %v; want no result and an error matching ErrRunParked", res, err)
	}
	failed := &agent.RunError{RunRef: agent.RunRef{Kind: "agent", Name: "a", RunID: "r1"}, Status: agent.RunFailed, Reason: "boom"}
	if res, err := ended(context.Background(), "r1", failed); err != nil || res.Status != Failed {
		t.Fatalf("ended(failed) = %+v, %v; want a failed result", res, err)
	}
}
