package agent

import (
	"errors"
	"fmt"
	"strings"

	"github.com/calf-go/calf"
)

// Errors of a run. A *RunError matches one of them with errors.Is.
var (
	ErrRunFailed    = errors.New("agent: run failed")
	ErrRunCancelled = errors.New("agent: run cancelled")
	// ErrRunParked is matched by the error of Run and RunStream when a
	// handler of the agent parked a message of the run on
	// [calf.DeadLetterChannel] after its last attempt: the run cannot go
	// on by itself. It has not ended: replaying the dead letter, once its
	// cause is fixed ([deadletter.Replay], or calf deadletters replay),
	// continues it, and [Agent.Wait] then gives its output.
	ErrRunParked = errors.New("agent: run held up by a parked message")
	// ErrNotServed is matched by the error of Run and RunStream when no
	// process serves the agent: nothing consumes its input channel (see
	// [Options.StartTimeout]). The run is cancelled, so that a worker that
	// starts later does not carry it out for nobody.
	ErrNotServed = errors.New("agent: no process serves the agent")
)

// RunRef names a run: the kind of runner it is a run of ("agent",
// "team" or "workflow"), the runner's name and the run's id. The runtime's
// controls of an agent's runs known by name ([Runtime.Cancel],
// [Runtime.Pause], [Runtime.Resume], [Runtime.SetBudget],
// [Runtime.Submit]) take one whose Kind is "agent" or empty.
type RunRef struct {
	// Kind is "agent", "team" or "workflow"; empty means "agent".
	Kind string
	// Name is the agent's, the team's or the workflow's name.
	Name string
	// RunID is the run's id.
	RunID string
}

// kind returns r's kind, "agent" when empty.
func (r RunRef) kind() string {
	if r.Kind == "" {
		return "agent"
	}
	return r.Kind
}

// agentRef checks that r names a run of an agent, for the runtime's
// controls of agent runs.
func (r RunRef) agentRef(verb string) error {
	switch {
	case r.kind() != "agent":
		return fmt.Errorf("agent: %s: run %s of %s %s is not an agent's run", verb, r.RunID, r.Kind, r.Name)
	case r.Name == "" || r.RunID == "":
		return fmt.Errorf("agent: %s: the run needs an agent name and a run id (RunRef{Name: %q, RunID: %q})", verb, r.Name, r.RunID)
	}
	return nil
}

// RunError reports a run that ended without output: the run of an agent,
// a team or a workflow, which RunRef names (Kind says which). It is the
// one error type of a failed, cancelled or held-up run for the three kinds
// of runners, and matches with errors.Is [ErrRunFailed] or
// [ErrRunCancelled] by its Status, [ErrRunParked] when Parked is set,
// [ErrGuardrailTripped] when Guardrail is, and what its Err matches.
type RunError struct {
	RunRef
	// Status is the run's status: failed, cancelled, or running for a run
	// held up by a parked message.
	Status RunStatus
	// Reason says why, as recorded in the run's state.
	Reason string
	// Err is the cause, when there is one to match: the caller's context
	// error for a run cancelled because its caller stopped waiting,
	// [ErrNotServed], or a runner's own sentinel (a workflow's
	// workflow.ErrLimit, a team's team.ErrUnknownMember).
	Err error
	// Parked is the dead letter of the message that holds up the run,
	// for an error matching ErrRunParked.
	Parked *calf.DeadLetter
	// Guardrail is the guardrail that ended the run, for an error matching
	// ErrGuardrailTripped.
	Guardrail *GuardrailTrip
}

func (e *RunError) Error() string {
	return fmt.Sprintf("%s %s: run %s %s: %s", e.kind(), e.Name, e.RunID, e.Status, e.Reason)
}

// Is matches ErrRunFailed, ErrRunCancelled, ErrRunParked or
// ErrGuardrailTripped.
func (e *RunError) Is(target error) bool {
	return (target == ErrRunFailed && e.Status == RunFailed) || (target == ErrRunCancelled && e.Status == RunCancelled) ||
		(target == ErrRunParked && e.Parked != nil) || (target == ErrGuardrailTripped && e.Guardrail != nil)
}

// ParkedError returns the error that a caller waiting on run (of an
// agent, a team or a workflow) reports when msg, a message of
// [calf.DeadLetterChannel] that belongs to the run or to a run it started,
// holds it up: a *RunError matching [ErrRunParked], with Parked set. A
// dead letter parked by another kind of subscriber (one outside Calf's
// agent, team and workflow handlers) holds nothing up: ParkedError returns
// nil for it, and for a message that is not a dead letter.
func ParkedError(msg *calf.Message, run RunRef) error {
	var dl calf.DeadLetter
	if err := msg.Decode(&dl); err != nil || dl.Message == nil || !heldUp(dl.Group) {
		return nil
	}
	parked := dl.Message.Metadata.RunID
	if parked == "" {
		parked = run.RunID
	}
	run.Kind = run.kind()
	return &RunError{
		RunRef: run, Status: RunRunning, Parked: &dl,
		Reason: fmt.Sprintf("message %s of run %s on %s was parked after %d attempts (%s); replaying dead letter %s continues the run",
			dl.Message.ID, parked, dl.Message.Channel, dl.Attempts, dl.Error, msg.ID),
	}
}

// heldUp reports whether a message that group parked holds its run up: the
// group is one of the handlers of an agent, a team or a workflow.
func heldUp(group string) bool {
	for _, p := range []string{channelPrefix, "calf.team.", "calf.workflow."} {
		if strings.HasPrefix(group, p) {
			return true
		}
	}
	return false
}

// Unwrap returns the error's cause, Err.
func (e *RunError) Unwrap() error { return e.Err }

// runError returns the *RunError of the run id of a that ended with
// status for reason.
func (a *Agent[Out]) runError(id string, status RunStatus, reason string) *RunError {
	return &RunError{RunRef: RunRef{Kind: "agent", Name: a.name, RunID: id}, Status: status, Reason: reason}
}

// agentRunError is runError for an agent known by name.
func agentRunError(name, id string, status RunStatus, reason string) *RunError {
	return &RunError{RunRef: RunRef{Kind: "agent", Name: name, RunID: id}, Status: status, Reason: reason}
}
