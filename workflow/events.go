package workflow

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/model"
)

// Channel names of a workflow. Every payload below is JSON;
// docs/channels.md describes them for implementers in other languages.
const (
	channelPrefix = "calf.workflow."

	suffixInput    = "input"
	suffixStep     = "step"
	suffixReply    = "reply"
	suffixResume   = "resume"
	suffixNodeDone = "node_done"
	suffixOutput   = "output"
	suffixPause    = "pause"
)

// InputChannel returns the channel on which a workflow receives new runs
// (and forks of old ones).
func InputChannel(workflow string) string { return channelPrefix + workflow + "." + suffixInput }

// StepChannel returns the channel that asks a worker to run one node.
func StepChannel(workflow string) string { return channelPrefix + workflow + "." + suffixStep }

// ReplyChannel returns the channel on which the agent runs started by
// agent nodes report their output.
func ReplyChannel(workflow string) string { return channelPrefix + workflow + "." + suffixReply }

// ResumeChannel returns the channel that resumes an interrupted run.
func ResumeChannel(workflow string) string { return channelPrefix + workflow + "." + suffixResume }

// NodeDoneChannel returns the channel of node completions, for observers.
func NodeDoneChannel(workflow string) string { return channelPrefix + workflow + "." + suffixNodeDone }

// OutputChannel returns the channel on which a run reports its end, or its
// suspension by an interrupt.
func OutputChannel(workflow string) string { return channelPrefix + workflow + "." + suffixOutput }

// PauseChannel returns the channel of a workflow's pauses and resumes: the
// payload is an [agent.PauseEvent], with ids as an agent's
// ("{run}.pause.{step}.{n}" for the n-th pause of the run, from 0;
// "{run}.resume.{step}.{n}" for its n-th resume, from 1).
func PauseChannel(workflow string) string { return channelPrefix + workflow + "." + suffixPause }

// AllChannels returns the pattern that matches every channel of a workflow.
func AllChannels(workflow string) string { return channelPrefix + workflow + ".>" }

// Deterministic event ids: a re-emitted event has the id of the original.
func inputID(run string) string { return run + ".input" }
func stepID(run string, step int, node string) string {
	return run + ".step." + strconv.Itoa(step) + "." + node
}
func nodeDoneID(run string, step int) string { return run + ".node_done." + strconv.Itoa(step) }
func resumeID(run string, n int) string      { return run + ".resume." + strconv.Itoa(n) }
func outputID(run string) string             { return run + ".output" }
func interruptedID(run string, n int) string { return run + ".interrupted." + strconv.Itoa(n) }
func replyID(run string) string              { return run + ".reply" }

// childRunID is the run id of the agent run an agent node starts at a step.
func childRunID(run string, step int, node string) string {
	return run + "." + strconv.Itoa(step) + "." + node
}

// replyRef is the reference an agent run echoes in its reply.
func replyRef(step int, node string) string { return strconv.Itoa(step) + "/" + node }

func parseRef(ref string) (int, string, error) {
	for i := 0; i < len(ref); i++ {
		if ref[i] == '/' {
			step, err := strconv.Atoi(ref[:i])
			if err != nil || step < 1 || i+1 == len(ref) {
				break
			}
			return step, ref[i+1:], nil
		}
	}
	return 0, "", fmt.Errorf("workflow: malformed reply reference %q", ref)
}

// InputEvent is the payload of the input channel: a new run, or a fork of
// an old run from one of its checkpoints. The message's metadata carries
// the run id (also the correlation id).
type InputEvent struct {
	// State is the initial state, as JSON. For a fork it replaces the
	// checkpoint's state when set.
	State json.RawMessage `json:"state,omitempty"`
	// From, when set, makes the run a fork: it starts where the run From.Run
	// was at its checkpoint From.Seq.
	From *ForkFrom `json:"from,omitempty"`
	// ReplyTo, when set, asks for the run's end to be reported there too,
	// as an agent.OutputEvent (Content is the final state), so that a
	// parent (an agent, a team, another workflow) learns of it by an
	// event. Its id is "{run}.reply".
	ReplyTo *agent.ReplyTo `json:"reply_to,omitempty"`
	// Parent is the id of the run that started this one, if any.
	Parent string `json:"parent,omitempty"`
	// Budget, when set, bounds what the run spends; see
	// [RunOptions.Budget].
	Budget *agent.Budget `json:"budget,omitempty"`
	// Deadline, when set, ends the run when it passes; see
	// [RunOptions.Deadline].
	Deadline time.Time `json:"deadline,omitzero"`
}

// ForkFrom names the checkpoint a forked run starts from.
type ForkFrom struct {
	// Run is the run forked, Seq the number of its checkpoint.
	Run string `json:"run"`
	Seq int    `json:"seq"`
}

// StepEvent is the payload of the step channel: run node Node as step Step
// of the run.
type StepEvent struct {
	Step int    `json:"step"`
	Node string `json:"node"`
}

// ResumeEvent is the payload of the resume channel: the input that resumes
// the run's interrupt number Interrupt.
type ResumeEvent struct {
	Interrupt int             `json:"interrupt"`
	Input     json.RawMessage `json:"input,omitempty"`
}

// NodeDoneEvent is the payload of the node-done channel: step Step ran
// Node (for the branches of a parallel step, their names joined by
// commas), the state was saved as checkpoint Checkpoint, and Next runs
// next ("end" when the run is complete).
type NodeDoneEvent struct {
	Step       int             `json:"step"`
	Node       string          `json:"node"`
	Checkpoint int             `json:"checkpoint"`
	Next       []string        `json:"next"`
	State      json.RawMessage `json:"state"`
}

// Output statuses.
const (
	OutputComplete    = "complete"
	OutputFailed      = "error"
	OutputInterrupted = "interrupted"
	OutputCancelled   = "cancelled"
)

// OutputEvent is the payload of the output channel. A run that ends emits
// it with status "complete" (State holds the final state), "error" or
// "cancelled" (Error says why); a run that interrupts emits it with status
// "interrupted" and Interrupt set, and emits another output when it ends.
type OutputEvent struct {
	Status string          `json:"status"`
	State  json.RawMessage `json:"state,omitempty"`
	Error  string          `json:"error,omitempty"`
	// ErrorKind classifies some errors: "limit" for a run stopped by
	// MaxSteps or MaxVisits.
	ErrorKind string         `json:"error_kind,omitempty"`
	Interrupt *InterruptInfo `json:"interrupt,omitempty"`
	// Steps is the number of steps the run took.
	Steps int    `json:"steps"`
	RunID string `json:"run_id"`
	// Usage and Cost add up the runs of the workflow's agent nodes.
	Usage model.Usage `json:"usage"`
	Cost  model.Cost  `json:"cost"`
}

// InterruptInfo describes where a run waits for input.
type InterruptInfo struct {
	// N numbers the run's interrupts from 1; Workflow.Answer answers the last one.
	N      int    `json:"n"`
	Step   int    `json:"step"`
	Node   string `json:"node"`
	Reason string `json:"reason"`
}
