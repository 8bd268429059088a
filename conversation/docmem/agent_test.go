package docmem_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/calf-go/calf/conversation"
	"github.com/calf-go/calf/conversation/docmem"
	"github.com/calf-go/calf/conversation/host"
	"github.com/calf-go/calf/internal/convid"
	storemem "github.com/calf-go/calf/store/memory"
)

// The code handler applies a message's command, in the argument form or as
// JSON text, with the correlation id (or the message's id) as the
// command's id: the same message again answers with the first result,
// marked duplicate, and changes nothing.
func TestCodeHandler(t *testing.T) {
	const conv = "0b6f3c3e-8d1a-4c59-9f0e-2a1b3c4d5e6f"
	h := docmem.New(storemem.New(), nil).CodeHandler()
	inst := conversation.Instance{ID: convid.InstanceID("docmem-agent", conv), Prototype: "docmem-agent", Conversation: conv}
	call := func(id string, m conversation.ConversationMessage) docmem.Result {
		t.Helper()
		m.ConversationID, m.AgentID, m.Timestamp = conv, convid.InstanceID("chat", conv), time.Now()
		text, err := h(t.Context(), host.CodeRequest{Instance: inst, From: m.AgentID, ID: id, Message: m})
		if err != nil {
			t.Fatal(err)
		}
		var res docmem.Result
		if err := json.Unmarshal([]byte(text), &res); err != nil {
			t.Fatalf("%q: %v", text, err)
		}
		return res
	}
	create := conversation.ConversationMessage{Command: []string{"docmem-create", "project-notes"}, CorrelationID: "c1"}
	if res := call("m1", create); !res.OK || res.ID != "c1" || res.Duplicate {
		t.Fatalf("create: %+v", res)
	}
	if res := call("m1", create); !res.OK || !res.Duplicate {
		t.Fatalf("create again: %+v", res)
	}
	// JSON text without an id: the message's id is the command's.
	appendText := conversation.ConversationMessage{Message: `{"command":"append","doc":"project-notes","parent":"root","text":"Decisions"}`}
	if res := call("m2", appendText); !res.OK || res.ID != "m2" || res.Node != "n1" {
		t.Fatalf("append: %+v", res)
	}
	if res := call("m2", appendText); !res.Duplicate || res.Node != "n1" {
		t.Fatalf("append again: %+v", res)
	}
	if res := call("m3", conversation.ConversationMessage{Command: []string{"docmem-read", "project-notes"}}); !res.OK || res.Text == "" {
		t.Fatalf("read: %+v", res)
	}
	if res := call("m4", conversation.ConversationMessage{Command: []string{"docmem-teleport"}, CorrelationID: "c4"}); res.OK || res.Code != docmem.CodeUnknownCommand {
		t.Fatalf("unknown: %+v", res)
	}
}
