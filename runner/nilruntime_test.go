package runner_test

import (
	"errors"
	"testing"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/runner"
	"github.com/calf-go/calf/store"
)

// A nil runtime means the default one for a runner's Status and Cancel,
// as for its Run.
func TestNilRuntimeMeansTheDefault(t *testing.T) {
	a := agent.Must(agent.NewText("nilrt", modeltest.NewTestModel(), "Answer."))
	r := runner.Agent(a)
	if _, err := r.Status(t.Context(), nil, "no-such-run"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Status of an unknown run with a nil runtime = %v, want store.ErrNotFound", err)
	}
	if err := r.Cancel(t.Context(), nil, "nilrt-run", "test"); err != nil {
		t.Errorf("Cancel with a nil runtime: %v", err)
	}
	res, err := r.Status(t.Context(), nil, "nilrt-run")
	if err != nil || res.Status != runner.Cancelled {
		t.Errorf("Status of the cancelled run = %+v, %v", res, err)
	}
}
