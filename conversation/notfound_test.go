package conversation_test

import (
	"context"
	"errors"
	"testing"

	"github.com/calf-go/calf/conversation"
	"github.com/calf-go/calf/store"
	storemem "github.com/calf-go/calf/store/memory"
)

// TestNotFoundIsStoreNotFound: an unknown conversation's and prototype's
// errors match both conversation.ErrNotFound and store.ErrNotFound.
func TestNotFoundIsStoreNotFound(t *testing.T) {
	ctx := context.Background()
	st := storemem.New()
	_, err := conversation.NewConversations(st, nil).Get(ctx, "c-unknown")
	if !errors.Is(err, conversation.ErrNotFound) || !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Conversations.Get of an unknown id: %v; want an error matching conversation.ErrNotFound and store.ErrNotFound", err)
	}
	_, err = conversation.NewPrototypes(st).Get(ctx, "unknown")
	if !errors.Is(err, conversation.ErrNotFound) || !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Prototypes.Get of an unknown name: %v; want an error matching conversation.ErrNotFound and store.ErrNotFound", err)
	}
}
