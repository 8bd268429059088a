package conversation

import (
	"crypto/rand"
	"fmt"

	"github.com/calf-go/calf/internal/convid"
)

// UserParticipant is the participant that stands for the user's side of a
// conversation (the UI) on its topics and channels.
const UserParticipant = convid.UserParticipant

// NewUUID returns a random (version 4) UUID.
func NewUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
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
