package host_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/conversation"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	storemem "github.com/calf-go/calf/store/memory"
)

// TestHistory: the user's exchanges with the entry instance, read back
// from its session: a message answered after a "# Run" round counts once,
// with the last round's answer and without the block; a plain one follows.
func TestHistory(t *testing.T) {
	m := modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
		last := lastUser(req)
		switch {
		case strings.HasPrefix(last, "Results of your # Run block"):
			return modeltest.Text("Done: project-notes exists."), nil
		case strings.HasPrefix(last, "Create"):
			return modeltest.Text("I'll make it.\n\n# Run\nstart-conversation docmem-agent\nsend docmem-agent docmem-create project-notes\n"), nil
		}
		return modeltest.Text("You said: " + last), nil
	})
	e := newHost(t, memory.New(nil), storemem.New(), m, nil)
	c := e.create()
	if h, err := e.convs.History(t.Context(), c.ID); err != nil || len(h) != 0 {
		t.Fatalf("History of a new conversation = %+v, %v", h, err)
	}
	e.say(c, "Create a docmem called project-notes")
	e.wait(c, 1)
	e.say(c, "thanks")
	e.wait(c, 2)
	h, err := e.convs.History(t.Context(), c.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := []conversation.Exchange{
		{Message: "Create a docmem called project-notes", Answer: "Done: project-notes exists."},
		{Message: "thanks", Answer: "You said: thanks"},
	}
	if diff := cmp.Diff(want, h); diff != "" {
		t.Errorf("History (-want +got):\n%s", diff)
	}
	if _, err := e.convs.History(t.Context(), "00000000-0000-4000-8000-000000000000"); !errors.Is(err, conversation.ErrNotFound) {
		t.Errorf("History of an unknown conversation: %v, want ErrNotFound", err)
	}
}
