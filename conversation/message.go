package conversation

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/calf-go/calf/internal/convid"
)

// ConversationMessage is the message on every conversation channel, as
// JSON (docs/channels.md):
//
//	{"conversation_id": "…", "user_id": "u1", "agent_id": null,
//	 "message": "Create a docmem called project-notes",
//	 "timestamp": "2026-11-27T23:40:00Z"}
//
// A user's message has UserID set and AgentID empty (null on the wire);
// an agent's message has AgentID, its instance id, set and UserID empty.
// A tool command has Command set; a reply to a request carries the
// request's CorrelationID.
type ConversationMessage struct {
	ConversationID string    `json:"conversation_id"`
	UserID         string    `json:"user_id"`
	AgentID        string    `json:"agent_id"`
	Message        string    `json:"message"`
	Timestamp      time.Time `json:"timestamp"`
	Command        []string  `json:"command,omitempty"`
	CorrelationID  string    `json:"correlation_id,omitempty"`
}

// MarshalJSON writes an empty UserID or AgentID as null, as the wire
// format says.
func (m ConversationMessage) MarshalJSON() ([]byte, error) {
	type wire struct {
		ConversationID string    `json:"conversation_id"`
		UserID         *string   `json:"user_id"`
		AgentID        *string   `json:"agent_id"`
		Message        string    `json:"message"`
		Timestamp      time.Time `json:"timestamp"`
		Command        []string  `json:"command,omitempty"`
		CorrelationID  string    `json:"correlation_id,omitempty"`
	}
	w := wire{ConversationID: m.ConversationID, Message: m.Message, Timestamp: m.Timestamp, Command: m.Command, CorrelationID: m.CorrelationID}
	if m.UserID != "" {
		w.UserID = &m.UserID
	}
	if m.AgentID != "" {
		w.AgentID = &m.AgentID
	}
	return json.Marshal(w)
}

// IsError reports whether m refuses a message or reports a failure (a
// stopped conversation, a failed run) rather than answers: its text
// starts with "error: ", as the host's refusals do.
func (m ConversationMessage) IsError() bool {
	return strings.HasPrefix(m.Message, convid.ErrorPrefix)
}

// Validate reports what makes m not a conversation message: no
// conversation id, neither or both of a user and an agent, an agent id
// that is no instance of the conversation, a missing timestamp, or a
// command of more than 64 arguments.
func (m *ConversationMessage) Validate() error {
	if err := convid.CheckConversationID(m.ConversationID); err != nil {
		return fmt.Errorf("conversation: message: conversation_id: %w", err)
	}
	if (m.UserID == "") == (m.AgentID == "") {
		return fmt.Errorf("%w: message: want exactly one of user_id and agent_id", ErrInvalidID)
	}
	if m.AgentID != "" {
		if _, conv, ok := convid.SplitInstanceID(m.AgentID); !ok || conv != m.ConversationID {
			return fmt.Errorf("%w: message: agent_id %q is no instance of conversation %s", ErrInvalidID, convid.Truncate(m.AgentID), m.ConversationID)
		}
	}
	if len(m.UserID) > convid.MaxUserIDLen {
		return fmt.Errorf("%w: message: user_id longer than %d bytes", ErrInvalidID, convid.MaxUserIDLen)
	}
	if m.Timestamp.IsZero() {
		return fmt.Errorf("%w: message: no timestamp", ErrInvalidID)
	}
	if len(m.Command) > convid.MaxCommandArgs {
		return fmt.Errorf("%w: message: a command of %d arguments (at most %d)", ErrInvalidID, len(m.Command), convid.MaxCommandArgs)
	}
	return nil
}

// DecodeMessage decodes and validates a conversation message.
func DecodeMessage(data []byte) (ConversationMessage, error) {
	var m ConversationMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return ConversationMessage{}, fmt.Errorf("conversation: message: %w", err)
	}
	if err := m.Validate(); err != nil {
		return ConversationMessage{}, err
	}
	return m, nil
}
