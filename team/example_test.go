package team_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	storemem "github.com/calf-go/calf/store/memory"
	"github.com/calf-go/calf/team"
)

// echo is an agent whose scripted model answers with its name and the
// first line of its input.
func echo(ctx context.Context, rt *agent.Runtime, name string) *agent.Agent[string] {
	m := modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
		in, _, _ := strings.Cut(req.Messages[len(req.Messages)-1].Text(), "\n")
		return modeltest.Text(name + " on " + in), nil
	})
	a := agent.Must(agent.New(name, m, nil))
	if err := a.Serve(ctx, rt, nil); err != nil {
		panic(err)
	}
	return a
}

// A sequential team: each member's output is the next one's input.
func Example() {
	ctx := context.Background()
	b := memory.New(nil)
	defer b.Close()
	rt := agent.NewRuntime(calf.NewClient(b, nil), storemem.New(), nil)

	writer, editor := echo(ctx, rt, "writer"), echo(ctx, rt, "editor")
	t := team.Must(team.NewSequential("content", []team.Member{team.AgentMember(writer), team.AgentMember(editor)}, nil))
	if err := t.Serve(ctx, rt, nil); err != nil {
		panic(err)
	}
	out, err := t.Run(ctx, rt, "cats", nil)
	if err != nil {
		panic(err)
	}
	fmt.Println(out.Output)
	for _, turn := range out.Transcript {
		fmt.Printf("step %d, %s: %s\n", turn.Step, turn.Member, turn.Content)
	}
	// Output:
	// editor on writer on cats
	// step 1, writer: writer on cats
	// step 2, editor: editor on writer on cats
}

// A concurrent team whose aggregator is a function.
func ExampleNewConcurrent() {
	ctx := context.Background()
	b := memory.New(nil)
	defer b.Close()
	rt := agent.NewRuntime(calf.NewClient(b, nil), storemem.New(), nil)

	optimist, pessimist := echo(ctx, rt, "optimist"), echo(ctx, rt, "pessimist")
	vote := team.AggregateFunc(func(_ context.Context, task string, answers []team.Turn) (string, error) {
		var parts []string
		for _, a := range answers {
			parts = append(parts, a.Content)
		}
		return strings.Join(parts, " | "), nil
	})
	t := team.Must(team.NewConcurrent("panel", []team.Member{team.AgentMember(optimist), team.AgentMember(pessimist)}, vote, nil))
	if err := t.Serve(ctx, rt, nil); err != nil {
		panic(err)
	}
	out, err := t.Run(ctx, rt, "the weather", nil)
	if err != nil {
		panic(err)
	}
	fmt.Println(out.Output)
	// Output:
	// optimist on the weather | pessimist on the weather
}

// A group chat: members speak in turn until one says the keyword.
func ExampleNewGroupChat() {
	ctx := context.Background()
	b := memory.New(nil)
	defer b.Close()
	rt := agent.NewRuntime(calf.NewClient(b, nil), storemem.New(), nil)

	author := echo(ctx, rt, "author")
	critic := agent.Must(agent.New("critic", modeltest.NewTestModel(
		modeltest.Text("too long"), modeltest.Text("APPROVED"),
	), nil))
	if err := critic.Serve(ctx, rt, nil); err != nil {
		panic(err)
	}
	t := team.Must(team.NewGroupChat("review", []team.Member{team.AgentMember(author), team.AgentMember(critic)},
		team.RoundRobin(), &team.Options{Keyword: "APPROVED", MaxRounds: 6}))
	if err := t.Serve(ctx, rt, nil); err != nil {
		panic(err)
	}
	out, err := t.Run(ctx, rt, "a haiku", nil)
	if err != nil {
		panic(err)
	}
	for _, turn := range out.Transcript {
		fmt.Printf("%s: %s\n", turn.Member, turn.Content)
	}
	// Output:
	// author: author on Task: a haiku
	// critic: too long
	// author: author on Task: a haiku
	// critic: APPROVED
}

// RunStream yields the members' events as they happen, tagged with the
// step and the member.
func ExampleTeam_RunStream() {
	ctx := context.Background()
	b := memory.New(nil)
	defer b.Close()
	rt := agent.NewRuntime(calf.NewClient(b, nil), storemem.New(), nil)

	writer, editor := echo(ctx, rt, "writer"), echo(ctx, rt, "editor")
	t := team.Must(team.NewSequential("content", []team.Member{team.AgentMember(writer), team.AgentMember(editor)}, nil))
	if err := t.Serve(ctx, rt, nil); err != nil {
		panic(err)
	}
	for ev, err := range t.RunStream(ctx, rt, "cats", nil) {
		if err != nil {
			panic(err)
		}
		switch ev.Kind {
		case team.EventStep:
			fmt.Println("step", ev.Step)
		case team.EventMember:
			if ev.Agent.Kind == agent.EventOutput {
				fmt.Printf("  %s: %s\n", ev.Member, ev.Agent.Output.Content)
			}
		case team.EventOutput:
			fmt.Println("team:", string(ev.Output.Content))
		}
	}
	// Output:
	// step 1
	//   writer: "writer on cats"
	// step 2
	//   editor: "editor on writer on cats"
	// team: "editor on writer on cats"
}
