package conversation

// NewID is newID, the default id of a new conversation, for the tests
// that need a conversation id of their own.
var NewID = newID
