package compaction_test

import (
	"context"
	"fmt"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/agent/compaction"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
)

// An agent whose runs keep their context under 50,000 tokens: the older
// messages are summarized by a cheaper model.
func ExampleConfig() {
	m, cheap := modeltest.NewTestModel(), modeltest.NewTestModel()
	a, err := agent.New("assistant", m, &agent.Options{
		Compaction: &compaction.Config{Threshold: 50_000, Compactor: compaction.Summarize(cheap, "")},
	})
	fmt.Println(a.Name(), err)
	// Output: assistant <nil>
}

// A compactor of one's own: the older messages give way to a note of how
// many there were.
func ExampleFunc() {
	elide := compaction.Func(func(_ context.Context, in *compaction.Input) (*compaction.Result, error) {
		note := fmt.Sprintf("[%d earlier messages elided]", len(in.Messages))
		return &compaction.Result{Messages: []model.Message{model.UserMessage(note)}}, nil
	})
	res, _ := elide.Compact(context.Background(), &compaction.Input{Messages: conversation()})
	fmt.Println(res.Messages[0].Text())
	// Output: [4 earlier messages elided]
}
