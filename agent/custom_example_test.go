package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"strings"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/local"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/tool"
)

// A custom agent: Go code in place of a model, with typed state kept per
// session. It runs like any agent, and goes where agents go: team
// members, workflow nodes, handoff targets, subagents (c.Agent).
func ExampleNewCustom() {
	type notes struct {
		Items []string `json:"items"`
	}
	keeper := agent.Must(agent.NewCustom("notes", func(sc *agent.StepContext[notes], in []model.Message) (string, error) {
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
	rt := local.Runtime()
	session := &agent.RunOptions{SessionID: "notes-1"}
	for _, p := range []string{"note buy milk", "note call Ann", "list"} {
		out, err := keeper.Run(ctx, rt, p, session)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(out.Output)
	}
	st, err := keeper.State(ctx, rt, "notes-1")
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

// A custom step that asks a model for a tool's arguments and runs the
// tool: RunStream yields both calls as custom events, and a step run again
// gets their recorded answers instead of calling again.
func ExampleStepContext_Generate() {
	m := modeltest.FunctionModel(func(ctx context.Context, req *model.Request) (*model.Response, error) {
		return &model.Response{Message: model.AssistantMessage(`{"a":2,"b":3}`), Usage: model.Usage{InputTokens: 12, OutputTokens: 5}}, nil
	})
	add := tool.Must(tool.New("add", "Adds a and b.", func(ctx context.Context, in struct {
		A int `json:"a"`
		B int `json:"b"`
	}) (int, error) {
		return in.A + in.B, nil
	}))
	adder := agent.Must(agent.NewCustom("adder", func(sc *agent.StepContext[struct{}], in []model.Message) (string, error) {
		resp, err := sc.Generate(m, &model.Request{Messages: in})
		if err != nil {
			return "", err
		}
		res, err := sc.CallTool(add, json.RawMessage(resp.Message.Text()))
		if err != nil {
			return "", err
		}
		return "the sum is " + res.Text(), nil
	}, nil))

	for ev, err := range adder.RunStream(context.Background(), local.Runtime(), "add 2 and 3", nil) {
		if err != nil {
			log.Fatal(err)
		}
		switch ev.Kind {
		case agent.EventCustom:
			fmt.Println(ev.Custom.Type)
		case agent.EventOutput:
			fmt.Println(string(ev.Output.Content), ev.Output.Usage.InputTokens, "input tokens")
		}
	}
	// Output:
	// model_response
	// tool_call
	// tool_result
	// "the sum is 5" 12 input tokens
}
