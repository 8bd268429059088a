package conversation_test

import (
	"testing"

	"github.com/calf-go/calf/conversation"
	"github.com/calf-go/calf/internal/convid"
)

// A new conversation id is a canonical lowercase UUID of version 4 and
// of the RFC 4122 variant, as the stored conversations' ids are, and no
// two are the same.
func TestNewIDIsAVersion4UUID(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := conversation.NewID()
		if err := convid.CheckConversationID(id); err != nil {
			t.Fatal(err)
		}
		if id[14] != '4' {
			t.Fatalf("%s: version %c; want 4", id, id[14])
		}
		if v := id[19]; v != '8' && v != '9' && v != 'a' && v != 'b' {
			t.Fatalf("%s: variant digit %c; want one of 8, 9, a, b", id, v)
		}
		if seen[id] {
			t.Fatalf("%s made twice", id)
		}
		seen[id] = true
	}
}
