package conversation_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/calf-go/calf/conversation"
	storemem "github.com/calf-go/calf/store/memory"
)

// A conversation of the seed's system: the user talks to the
// conversational agent, which starts a docmem agent; stopping it refuses
// further messages.
func ExampleConversations() {
	ctx := context.Background()
	st := storemem.New()
	defer st.Close()
	ps, err := conversation.LoadFile("testdata/conversations.yaml")
	if err != nil {
		panic(err)
	}
	convs := conversation.NewConversations(st, &conversation.Options{NewID: func() string { return "0b6f3c3e-8d1a-4c59-9f0e-2a1b3c4d5e6f" }})
	if err := convs.Prototypes().RegisterAll(ctx, ps, false); err != nil {
		panic(err)
	}
	c, err := convs.Create(ctx, conversation.NewConversation{UserID: "u1", Description: "User chat"})
	if err != nil {
		panic(err)
	}
	dm, err := convs.Spawn(ctx, c.ID, c.Entry, "docmem-agent")
	if err != nil {
		panic(err)
	}
	ch, _ := convs.Route(ctx, c.ID, c.Entry, dm.ID)
	fmt.Println(dm.ID)
	fmt.Println(ch)
	if _, err := convs.Stop(ctx, c.ID); err != nil {
		panic(err)
	}
	_, err = convs.Route(ctx, c.ID, conversation.UserParticipant, c.Entry)
	fmt.Println(errors.Is(err, conversation.ErrStopped))
	// Output:
	// docmem-agent-0b6f3c3e-8d1a-4c59-9f0e-2a1b3c4d5e6f
	// calf.conv.0b6f3c3e-8d1a-4c59-9f0e-2a1b3c4d5e6f.conversational-agent-0b6f3c3e-8d1a-4c59-9f0e-2a1b3c4d5e6f.docmem-agent-0b6f3c3e-8d1a-4c59-9f0e-2a1b3c4d5e6f
	// true
}

// A file with problems: every one is listed, with its line.
func ExampleParse() {
	_, err := conversation.Parse([]byte(`prototypes:
  - name: chat
    model: "anthropic:"
    tools: [teleport]
    subagents: [notes]
`))
	fmt.Println(err)
	// Output:
	// conversation: 3 problem(s)
	// 	line 3: prototype chat: model: models: "anthropic:" has no model name after "anthropic:"
	// 	line 4: prototype chat: tools: unknown built-in tool "teleport" (known: bash, edit_file, glob, grep, list_dir, read_file, web_fetch, web_search, write_file)
	// 	line 5: prototype chat: subagents: "notes" names no prototype
}
