package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent/internal/engine"
	"github.com/calf-go/calf/tool"
)

// WakeUps bounds the follow-ups an agent's model may schedule with the
// built-in tool schedule_wakeup ([Options.WakeUps]).
type WakeUps struct {
	// Max bounds the follow-ups pending in one session. Default: 10.
	Max int
	// MaxAhead bounds how far ahead one may be. Default: 30 days.
	MaxAhead time.Duration
}

// WakeUp is a follow-up an agent's model scheduled in a session: when
// due, the session's next turn starts with Note as its prompt.
type WakeUp struct {
	// ID names it (for [CancelWakeUp]).
	ID string `json:"id"`
	// Agent and SessionID say whose turn it starts.
	Agent     string `json:"agent"`
	SessionID string `json:"session_id"`
	// Due is when; Note what the model left for itself.
	Due  time.Time `json:"due"`
	Note string    `json:"note"`
	// RunID is the run it starts.
	RunID string `json:"run_id"`
	// Created is when the model scheduled it.
	Created time.Time `json:"created"`
}

// WakeUpToolName is the name of the built-in tool of [Options.WakeUps].
const WakeUpToolName = "schedule_wakeup"

// wakeUpPrefix is the prefix of the timer ids of a session's follow-ups.
func wakeUpPrefix(agent, session string) string { return "wakeup/" + agent + "/" + session + "/" }

// WakeUpNotePrefix starts the prompt of a turn a follow-up starts.
const WakeUpNotePrefix = "[scheduled follow-up] "

type wakeUpArgs struct {
	After string `json:"after,omitempty" jsonschema:"when, from now, as a duration such as 20m, 2h or 36h; give after or at"`
	At    string `json:"at,omitempty" jsonschema:"when, as an RFC 3339 time such as 2026-12-08T09:00:00+01:00; give after or at"`
	Note  string `json:"note" jsonschema:"what to do then: the prompt of the follow-up turn, for yourself"`
}

// wakeUpTool is schedule_wakeup for the agent named agent.
func wakeUpTool(agent string, o WakeUps) tool.Tool {
	if o.Max <= 0 {
		o.Max = 10
	}
	if o.MaxAhead <= 0 {
		o.MaxAhead = 30 * 24 * time.Hour
	}
	return tool.Must(tool.New(WakeUpToolName,
		"Schedule a follow-up of your own in this conversation: at the time given, you get the note as the next message and act on it "+
			"(check something again later, remind the user). The user can list and cancel follow-ups.",
		func(ctx context.Context, in wakeUpArgs) (string, error) {
			rc, ok := FromContext(ctx)
			if !ok || rc.rt == nil {
				return "", errors.New("schedule_wakeup runs in an agent's run")
			}
			if rc.SessionID == "" {
				return "", errors.New("a follow-up needs a conversation (a session) to come back to; this run has none")
			}
			note := strings.TrimSpace(in.Note)
			if note == "" {
				return "", errors.New("give a note: what to do at the follow-up")
			}
			now := rc.rt.now()
			var due time.Time
			switch {
			case in.After != "" && in.At != "", in.After == "" && in.At == "":
				return "", errors.New("give after (a duration) or at (a time), one of the two")
			case in.After != "":
				d, err := time.ParseDuration(in.After)
				if err != nil || d <= 0 {
					return "", fmt.Errorf("after %q: a positive duration such as 20m or 2h", in.After)
				}
				due = now.Add(d)
			default:
				t, err := time.Parse(time.RFC3339, in.At)
				if err != nil {
					return "", fmt.Errorf("at %q: an RFC 3339 time such as 2026-12-08T09:00:00Z", in.At)
				}
				if !t.After(now) {
					return "", fmt.Errorf("at %s is past (it is %s)", in.At, now.UTC().Format(time.RFC3339))
				}
				due = t
			}
			if due.Sub(now) > o.MaxAhead {
				return "", fmt.Errorf("at most %s ahead", o.MaxAhead)
			}
			pending, err := rc.rt.Timers(ctx, wakeUpPrefix(rc.Agent, rc.SessionID))
			if err != nil {
				return "", err
			}
			if len(pending) >= o.Max {
				return "", fmt.Errorf("this conversation has %d follow-ups pending, the most it may have: cancel one first", len(pending))
			}
			runID := "wake-" + rc.RunID + "-" + rc.ToolCallID
			data, err := json.Marshal(InputEvent{Content: WakeUpNotePrefix + note})
			if err != nil {
				return "", err
			}
			id := wakeUpPrefix(rc.Agent, rc.SessionID) + rc.RunID + "/" + rc.ToolCallID
			if _, err := rc.rt.StartTimer(ctx, Timer{ID: id, Due: due.UTC(), Channel: InputChannel(rc.Agent), Data: data, Key: runID,
				EventID:  engine.InputID(runID),
				Metadata: calf.Metadata{CorrelationID: runID, RunID: runID, SessionID: rc.SessionID}}); err != nil {
				return "", err
			}
			return fmt.Sprintf("Follow-up scheduled for %s (id %s).", due.UTC().Format(time.RFC3339), id), nil
		}))
}

// WakeUps returns the follow-ups pending in the session of the agent
// named agentName, the earliest id first.
func (rt *Runtime) WakeUps(ctx context.Context, agentName, sessionID string) ([]WakeUp, error) {
	ts, err := rt.Timers(ctx, wakeUpPrefix(agentName, sessionID))
	if err != nil {
		return nil, err
	}
	out := make([]WakeUp, 0, len(ts))
	for _, t := range ts {
		var in InputEvent
		_ = json.Unmarshal(t.Data, &in)
		out = append(out, WakeUp{ID: t.ID, Agent: agentName, SessionID: sessionID, Due: t.Due, RunID: t.Metadata.RunID,
			Note: strings.TrimPrefix(in.Content, WakeUpNotePrefix), Created: t.Created})
	}
	return out, nil
}

// CancelWakeUp cancels the follow-up id ([WakeUp.ID]), and reports
// whether it was pending.
func (rt *Runtime) CancelWakeUp(ctx context.Context, id string) (bool, error) {
	if !strings.HasPrefix(id, "wakeup/") {
		return false, fmt.Errorf("agent: %q is not a follow-up's id", id)
	}
	return rt.StopTimer(ctx, id)
}
