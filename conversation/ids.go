package conversation

import (
	"fmt"
	"strings"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/internal/convid"
)

// UserParticipant is the participant that stands for the user's side of a
// conversation (the UI) on its topics and channels.
const UserParticipant = convid.UserParticipant

// newID returns a new conversation id: the 128 random bits of
// [calf.NewID], Calf's one id function, written as a canonical lowercase
// UUID of version 4 (its version and variant digits set, 122 bits left
// random). Conversation ids are UUIDs, a choice of their format: an
// instance id ends with one at a fixed length ([SplitInstanceID]).
func newID() string {
	h := calf.NewID()
	variant := "89ab"[strings.IndexByte("0123456789abcdef", h[16])&3]
	return h[:8] + "-" + h[8:12] + "-4" + h[13:16] + "-" + string(variant) + h[17:20] + "-" + h[20:]
}

// checkParticipant reports whether p is a participant of conversation:
// [UserParticipant] or the id of one of its instances.
func checkParticipant(p, conversation string) error {
	if p == UserParticipant {
		return nil
	}
	if _, conv, ok := convid.SplitInstanceID(p); !ok || conv != conversation {
		return fmt.Errorf("%w: %q is neither %q nor an instance of conversation %s", ErrInvalidID, convid.Truncate(p), UserParticipant, conversation)
	}
	return nil
}

// Channel returns the channel that carries the messages from participant
// from to participant to in conversation: calf.conv.{conversation}.{from}.{to}.
// Participants are [UserParticipant] and instance ids ([Instance.ID]).
func Channel(conversation, from, to string) (string, error) {
	if err := convid.CheckConversationID(conversation); err != nil {
		return "", err
	}
	for _, p := range []string{from, to} {
		if err := checkParticipant(p, conversation); err != nil {
			return "", err
		}
	}
	if from == to {
		return "", fmt.Errorf("%w: a channel from %s to itself", ErrInvalidID, from)
	}
	return "calf.conv." + conversation + "." + from + "." + to, nil
}
