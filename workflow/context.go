package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// RunInfo describes the step a node function runs in; see [Info].
type StepInfo struct {
	// Workflow and RunID name the run.
	Workflow string
	RunID    string
	// Step is the step's number in the run, from 1, and Node the node it
	// runs.
	Step int
	Node string
	// resume is the input of a resumed step.
	resume json.RawMessage
	// waits is what WaitSignal needs: nil outside a node.
	waits *nodeWaits
}

type infoKey struct{}

func withInfo(ctx context.Context, info StepInfo) context.Context {
	return context.WithValue(ctx, infoKey{}, info)
}

// Info returns the workflow run and step that a node function's context
// belongs to.
func Info(ctx context.Context) (StepInfo, bool) {
	info, ok := ctx.Value(infoKey{}).(StepInfo)
	return info, ok
}

// ResumeInput decodes into v the input that resumed the node's step (see
// [Workflow.Answer]) and reports whether there is one. A node that needs
// input calls it first, and returns [Interrupt] when there is none:
//
//	var answer string
//	if ok, err := workflow.ResumeInput(ctx, &answer); err != nil || !ok {
//		return s, cmp.Or(err, workflow.Interrupt("approve the draft?"))
//	}
func ResumeInput(ctx context.Context, v any) (bool, error) {
	info, ok := Info(ctx)
	if !ok || info.resume == nil {
		return false, nil
	}
	if err := json.Unmarshal(info.resume, v); err != nil {
		return true, fmt.Errorf("workflow: decode the resume input of node %q: %w", info.Node, err)
	}
	return true, nil
}

// ErrInterrupted matches an [InterruptError].
var ErrInterrupted = errors.New("workflow: interrupted")

// InterruptError is returned by a node to suspend its run until
// [Workflow.Answer] gives it input, and by [Workflow.Run] and
// [Workflow.Wait] for a run that is suspended so. Build it with
// [Interrupt].
type InterruptError struct {
	// RunID and Info are set when Run or Wait return it.
	RunID string
	Info  *InterruptInfo
	// Reason says what the run waits for.
	Reason string
}

// Interrupt returns the error with which a node suspends its run: the run
// costs only its stored state until [Workflow.Answer] sends input, and
// then the node runs again (on any worker) and finds the input with
// [ResumeInput]. The state the node returns with the interrupt is
// discarded. A branch of a parallel step cannot interrupt.
func Interrupt(reason string) error { return &InterruptError{Reason: reason} }

func (e *InterruptError) Error() string {
	if e.Info != nil {
		return fmt.Sprintf("workflow: run %s interrupted at node %q (step %d): %s", e.RunID, e.Info.Node, e.Info.Step, e.Reason)
	}
	return "workflow: interrupted: " + e.Reason
}

// Is matches [ErrInterrupted].
func (e *InterruptError) Is(target error) bool { return target == ErrInterrupted }
