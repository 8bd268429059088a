package conversation

import (
	"errors"

	"github.com/calf-go/calf/internal/convid"
	"github.com/calf-go/calf/store"
)

// Errors of the package, for errors.Is.
var (
	// ErrNotFound: no prototype, conversation or instance has the name or
	// id. It also matches [store.ErrNotFound].
	ErrNotFound = store.NotFound("conversation: not found")
	// ErrExists: a prototype of that name is registered already, and the
	// caller did not ask to replace it.
	ErrExists = errors.New("conversation: already exists")
	// ErrStopped: the conversation is stopped; it takes no new instances
	// and no messages.
	ErrStopped = errors.New("conversation: stopped")
	// ErrInvalidName: a prototype's name is not one: 1 to 48 bytes, a
	// lowercase letter first, then lowercase letters, digits, '-' and '_',
	// and not "user".
	ErrInvalidName = convid.ErrInvalidName
	// ErrInvalidID: a conversation id, instance id or participant is not one.
	ErrInvalidID = convid.ErrInvalidID
	// ErrInvalid is matched by a [*ValidationError]: prototypes with problems.
	ErrInvalid = errors.New("conversation: invalid prototypes")
	// ErrNotSubagent: an instance asked for an instance of a prototype its
	// own prototype does not list among its subagents.
	ErrNotSubagent = errors.New("conversation: not a subagent")
	// ErrNoTopic: two participants have no topic between them.
	ErrNoTopic = errors.New("conversation: no topic between the participants")
)
