package conversation

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/calf-go/calf/agent/session"
	"github.com/calf-go/calf/conversation/internal/runblock"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/store"
)

// Exchange is a message an LLM instance answered and the answer the sender
// got.
type Exchange struct {
	// Message is the message as the instance's run read it: its text, and
	// its command as a JSON array after "command: ".
	Message string `json:"message"`
	// Answer is the text sent back, without its "# Run" blocks.
	Answer string `json:"answer"`
}

// History returns the exchanges of the user's side with the conversation's
// entry instance, oldest first: its user-facing context, the instance's
// session (see [Host.ToolContext] for the calls and results left out of
// it). The exchanges of "# Run" rounds count as one, with the last round's
// answer. A message queued or in progress has no exchange yet, nor has an
// entry instance of a code or external prototype, which keeps no session.
// An error matches [ErrNotFound] when there is no such conversation.
func (c *Conversations) History(ctx context.Context, conversation string) ([]Exchange, error) {
	conv, err := c.Get(ctx, conversation)
	if err != nil {
		return nil, err
	}
	s, err := session.Load(ctx, c.s, conv.Entry)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("conversation: history of %s: %w", conversation, err)
	}
	return exchanges(s.Messages), nil
}

// exchanges reads the exchanges of an LLM instance's session: each
// message, and the last text answered before the next.
func exchanges(msgs []model.Message) []Exchange {
	var out []Exchange
	for _, m := range msgs {
		switch m.Role {
		case model.RoleUser:
			text := m.Text()
			if len(out) > 0 && (strings.HasPrefix(text, runblock.ResultsPrefix) || strings.HasPrefix(text, runblock.ProblemsPrefix)) {
				continue // a round of the message before
			}
			out = append(out, Exchange{Message: text})
		case model.RoleAssistant:
			if len(out) == 0 {
				continue
			}
			text := m.Text()
			if _, rest, err := runblock.Parse(text); err == nil {
				text = rest
			}
			if text = strings.TrimSpace(text); text != "" {
				out[len(out)-1].Answer = text
			}
		}
	}
	return out
}
