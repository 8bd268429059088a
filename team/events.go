package team

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"time"

	"github.com/calf-go/calf/agent"
)

// Channel names of a team. Every payload is JSON; docs/channels.md
// describes them for implementers in other languages.
const (
	channelPrefix = "calf.team."

	suffixInput      = "input"
	suffixStep       = "step"
	suffixMemberDone = "member_done"
	suffixOutput     = "output"
)

// InputChannel returns the channel on which a team receives new runs.
func InputChannel(team string) string { return channelPrefix + team + "." + suffixInput }

// StepChannel returns the channel that asks the team's coordinator to start
// the member runs of one step.
func StepChannel(team string) string { return channelPrefix + team + "." + suffixStep }

// MemberDoneChannel returns the channel on which the members' runs report
// their end: the ReplyTo of every run a team starts.
func MemberDoneChannel(team string) string { return channelPrefix + team + "." + suffixMemberDone }

// OutputChannel returns the channel of a team's final outputs.
func OutputChannel(team string) string { return channelPrefix + team + "." + suffixOutput }

// AllChannels returns the pattern that matches every channel of a team.
func AllChannels(team string) string { return channelPrefix + team + ".>" }

// Deterministic ids: a re-emitted event has the id of the original, and a
// member run started again has the run id of the original.
func inputID(run string) string { return run + ".input" }
func stepID(run string, step int) string {
	return run + ".step." + strconv.Itoa(step)
}
func outputID(run string) string { return run + ".output" }

// replyID is the id of a run's reply to r: one id per destination, as an
// agent's (docs/channels.md).
func replyID(run string, r *agent.ReplyTo) string {
	h := fnv.New64a()
	for _, s := range []string{r.Channel, r.Key, r.CorrelationID, r.Ref} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return fmt.Sprintf("%s.reply.%016x", run, h.Sum64())
}

// callRef names a member's call within a step; it is the Ref of the
// member run's reply.
func callRef(step int, member string) string { return strconv.Itoa(step) + "." + member }

// childRunID is the run id of member's run at step of the team run run.
func childRunID(run string, step int, member string) string { return run + "." + callRef(step, member) }

// InputEvent is the payload of a team's input channel. The message's
// metadata carries the run id (also the correlation id).
type InputEvent struct {
	// Content is the task.
	Content string `json:"content"`
	// ReplyTo, when set, asks for the team's output to be published there
	// too when the run ends, as an [agent.OutputEvent]: a team answers its
	// parent exactly as an agent does.
	ReplyTo *agent.ReplyTo `json:"reply_to,omitempty"`
	// Parent is the id of the run that started this one, if any.
	Parent string `json:"parent,omitempty"`
	// Stream asks the members' agents to emit their model deltas.
	Stream bool `json:"stream,omitempty"`
	// Budget, when set, bounds what the run spends; see
	// [RunOptions.Budget].
	Budget *agent.Budget `json:"budget,omitempty"`
	// Deadline, when set, ends the run when it passes; see
	// [RunOptions.Deadline].
	Deadline time.Time `json:"deadline,omitzero"`
}

// StepEvent is the payload of a team's step channel: start the member runs
// recorded for step Step that have not answered yet.
type StepEvent struct {
	Step int `json:"step"`
}
