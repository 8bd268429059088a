package conversation

import (
	"fmt"
	"strings"

	"github.com/calf-go/calf"
)

// Bounds of names and ids. They keep every conversation channel,
// calf.conv.{conversation}.{from}.{to}, under the 249 characters of a
// Kafka topic name and within what every broker accepts.
const (
	// MaxNameLen bounds a prototype's name.
	MaxNameLen = 48
	// UUIDLen is the length of a conversation id.
	UUIDLen = 36
)

// UserParticipant is the participant that stands for the user's side of a
// conversation (the UI) on its topics and channels.
const UserParticipant = "user"

// CheckName reports whether name may name a prototype: 1 to [MaxNameLen]
// bytes, a lowercase letter first, then lowercase letters, digits, '-' and
// '_'. Such a name is a valid channel token on every broker.
func CheckName(name string) error {
	if name == "" {
		return fmt.Errorf("%w: empty name", ErrInvalidName)
	}
	if len(name) > MaxNameLen {
		return fmt.Errorf("%w: %q is longer than %d bytes", ErrInvalidName, name[:MaxNameLen]+"...", MaxNameLen)
	}
	if name[0] < 'a' || name[0] > 'z' {
		return fmt.Errorf("%w: %q does not start with a lowercase letter", ErrInvalidName, name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return fmt.Errorf("%w: %q holds %q (want lowercase letters, digits, '-' and '_')", ErrInvalidName, name, c)
		}
	}
	if name == UserParticipant {
		return fmt.Errorf("%w: %q stands for the user's side", ErrInvalidName, name)
	}
	return nil
}

// CheckConversationID reports whether id is a conversation id: a UUID in
// its canonical lowercase form (8-4-4-4-12 hexadecimal digits).
func CheckConversationID(id string) error {
	if len(id) != UUIDLen {
		return fmt.Errorf("%w: %q is not a UUID", ErrInvalidID, truncate(id))
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return fmt.Errorf("%w: %q is not a UUID", ErrInvalidID, id)
			}
		default:
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
				return fmt.Errorf("%w: %q is not a lowercase UUID", ErrInvalidID, id)
			}
		}
	}
	return nil
}

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

// InstanceID returns the id of the instance of prototype in conversation:
// "{prototype}-{conversation}", as in conversational-agent-{id}. A
// conversation holds at most one instance of each prototype, so the id is
// the instance's address: whoever knows the prototype and the conversation
// reaches it. Since a conversation id is a UUID of fixed length, the id
// splits back unambiguously ([SplitInstanceID]).
func InstanceID(prototype, conversation string) string {
	return prototype + "-" + conversation
}

// SplitInstanceID returns the prototype and the conversation of an
// instance id, and false when id is not one.
func SplitInstanceID(id string) (prototype, conversation string, ok bool) {
	if len(id) < UUIDLen+2 || id[len(id)-UUIDLen-1] != '-' {
		return "", "", false
	}
	prototype, conversation = id[:len(id)-UUIDLen-1], id[len(id)-UUIDLen:]
	if CheckName(prototype) != nil || CheckConversationID(conversation) != nil {
		return "", "", false
	}
	return prototype, conversation, true
}

// checkParticipant reports whether p is a participant of conversation:
// [UserParticipant] or the id of one of its instances.
func checkParticipant(p, conversation string) error {
	if p == UserParticipant {
		return nil
	}
	if _, conv, ok := SplitInstanceID(p); !ok || conv != conversation {
		return fmt.Errorf("%w: %q is neither %q nor an instance of conversation %s", ErrInvalidID, truncate(p), UserParticipant, conversation)
	}
	return nil
}

// Channel returns the channel that carries the messages from participant
// from to participant to in conversation: calf.conv.{conversation}.{from}.{to}.
// Participants are [UserParticipant] and instance ids.
func Channel(conversation, from, to string) (string, error) {
	if err := CheckConversationID(conversation); err != nil {
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

// TopicName returns the name of the topic between participants a and b of
// a conversation: the two ids in byte order joined by a '.', the same
// whichever of them opened it.
func TopicName(a, b string) string {
	if b < a {
		a, b = b, a
	}
	return a + "." + b
}

func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
