package agent_test

import (
	"context"
	"fmt"
	"log"
	"strings"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/model"
)

// A custom agent: Go code in place of a model, with typed state kept per
// session. It runs like any agent, and goes where agents go: team
// members, workflow nodes, handoff targets, subagents (c.Agent).
func ExampleNewCustom() {
	type notes struct {
		Items []string `json:"items"`
	}
	keeper := agent.MustCustom(agent.NewCustom("notes", func(sc *agent.StepContext[notes], in []model.Message) (string, error) {
		prompt := in[len(in)-1].Text()
		if item, ok := strings.CutPrefix(prompt, "note "); ok {
			sc.State.Items = append(sc.State.Items, item)
			if err := sc.EmitEvent("noted", item); err != nil {
				return "", err
			}
			return "noted", nil
		}
		return strings.Join(sc.State.Items, "; "), nil
	}, &agent.CustomOptions{Description: "Keeps notes."}))

	ctx := context.Background()
	session := &agent.RunOptions{SessionID: "notes-1"}
	for _, p := range []string{"note buy milk", "note call Ann", "list"} {
		out, err := keeper.Run(ctx, nil, p, session)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(out.Output)
	}
	st, err := keeper.State(ctx, nil, "notes-1")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(st.Items), "items")
	// Output:
	// noted
	// noted
	// buy milk; call Ann
	// 2 items
}
