package agent

import (
	"testing"

	"github.com/calf-go/calf/agent/internal/sessionstore"
	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/store/memory"
)

// A session's status, which package agent/session reads from its runs'
// records without package agent, agrees with the run's own view: a
// session whose one run is in progress is paused exactly when the run is
// (runState.Paused) or has ended, and running otherwise.
func TestSessionStatusAgreesWithRun(t *testing.T) {
	for _, tt := range []struct {
		name string
		st   runState
		want string
	}{
		{"running", runState{Status: RunRunning, Phase: phaseInference, Step: 2}, sessionstore.StatusRunning},
		{"pause asked", runState{Status: RunRunning, Phase: phaseTools, Step: 2, Pause: &PauseState{}}, sessionstore.StatusRunning},
		{"paused", runState{Status: RunRunning, Phase: phaseInference, Step: 2, Pause: &PauseState{Step: 2}}, sessionstore.StatusPaused},
		{"paused at an earlier step", runState{Status: RunRunning, Phase: phaseInference, Step: 3, Pause: &PauseState{Step: 2}}, sessionstore.StatusRunning},
		{"pause in effect, tools due", runState{Status: RunRunning, Phase: phaseTools, Step: 2, Pause: &PauseState{Step: 2}}, sessionstore.StatusRunning},
		{"ended while paused", runState{Status: RunCancelled, Phase: phaseInference, Step: 2, Pause: &PauseState{Step: 2}}, sessionstore.StatusPaused},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st := tt.st
			st.RunID, st.Agent = "r1", "a"
			if got := st.Paused() || st.Status.Terminal(); got != (tt.want == sessionstore.StatusPaused) {
				t.Fatalf("the table is wrong: Paused() or ended is %v, want status %s", got, tt.want)
			}
			s := memory.New()
			data, err := st.encode()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Put(t.Context(), store.KindRun, "r1", data, 0); err != nil {
				t.Fatal(err)
			}
			got, err := sessionstore.New(s, nil, nil, false).Status(t.Context(), &sessionstore.Record{ID: "s", Active: []string{"r1"}})
			if err != nil || got != tt.want {
				t.Errorf("status %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

// The sessions copy and delete custom agents' state by their kind.
func TestAgentStateKindOfSessions(t *testing.T) {
	if KindAgentState != sessionstore.KindAgentState {
		t.Errorf("KindAgentState %q, the sessions' %q", KindAgentState, sessionstore.KindAgentState)
	}
}
