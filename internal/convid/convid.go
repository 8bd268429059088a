// Package convid holds what package conversation, its host and the
// command line share about the names and ids of conversations without
// exporting it to users: their bounds and checks, instance ids, topic
// names, the prefix of the host's error messages, and the record kind of
// the host's queues, which package conversation clears on a restart.
package convid

import (
	"errors"
	"fmt"
)

// Errors of the checks; package conversation exports them under the same
// names.
var (
	// ErrInvalidName: a prototype's name is not one (see [CheckName]).
	ErrInvalidName = errors.New("conversation: invalid name")
	// ErrInvalidID: a conversation id, instance id or participant is not one.
	ErrInvalidID = errors.New("conversation: invalid id")
)

// Bounds of names and ids. They keep every conversation channel,
// calf.conv.{conversation}.{from}.{to}, under the 249 characters of a
// Kafka topic name and within what every broker accepts.
const (
	// MaxNameLen bounds a prototype's name.
	MaxNameLen = 48
	// UUIDLen is the length of a conversation id.
	UUIDLen = 36
	// MaxUserIDLen bounds a conversation's and a message's user id.
	MaxUserIDLen = 256
	// MaxDescriptionLen bounds a conversation's description.
	MaxDescriptionLen = 1024
	// MaxCommandArgs bounds the arguments of a message's command.
	MaxCommandArgs = 64
	// MaxErrorLen bounds the reason recorded of a failed instance.
	MaxErrorLen = 2048
)

// UserParticipant is the participant that stands for the user's side of a
// conversation (the UI) on its topics and channels.
const UserParticipant = "user"

// KindInbox is the record kind of an LLM instance's queue of messages
// (package conversation/host): one record per instance that has received a
// message, id "{conversation}/{instance id}". Its value is that of records
// already stored: never change it.
const KindInbox = "conversation_inbox"

// ErrorPrefix starts the text of every message by which the host refuses a
// message or reports a failure (a stopped conversation, a failed run), so
// that a sender tells an error from an answer.
const ErrorPrefix = "error: "

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
		return fmt.Errorf("%w: %q is not a UUID", ErrInvalidID, Truncate(id))
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

// TopicName returns the name of the topic between participants a and b of
// a conversation: the two ids in byte order joined by a '.', the same
// whichever of them opened it.
func TopicName(a, b string) string {
	if b < a {
		a, b = b, a
	}
	return a + "." + b
}

// Truncate shortens s to 64 bytes and an ellipsis, for an error message
// that quotes an id that may be long.
func Truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
