package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/kafka"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	storemem "github.com/calf-go/calf/store/memory"
	"github.com/calf-go/calf/tool"
)

// On Kafka a topic per channel appears on its first publish, and a pattern
// subscriber in another process finds it only at a metadata refresh. A
// worker's Serve creates its agent's channels first, so that a caller
// following the very first run, on a broker of its own, sees all of it
// without waiting for that refresh.
func TestRunStreamSeesTheFirstRunOnKafka(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	opts := &kafka.Options{TopicPrefix: "s" + calf.NewID()[:10] + ".", Partitions: 2}
	open := func() calf.Broker {
		b, err := kafka.Open(t.Context(), c.ListenAddrs(), opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.Close() })
		return b
	}
	st := storemem.New()
	type args struct {
		A int `json:"a"`
		B int `json:"b"`
	}
	add := tool.Must(tool.New("add", "Add two integers.", func(_ context.Context, in args) (int, error) { return in.A + in.B, nil }))
	m := modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
		if last := req.Messages[len(req.Messages)-1]; last.Role == model.RoleTool {
			return modeltest.Text("The sum is " + last.Text()), nil
		}
		return modeltest.ToolCalls(modeltest.Call("call_1", "add", `{"a":2,"b":3}`)), nil
	})
	a := agent.Must(agent.New("streamer", m, &agent.Options{Tools: []tool.Tool{add}}))

	worker := agent.NewRuntime(calf.NewClient(open(), nil), st, nil)
	if err := a.Serve(t.Context(), worker, nil); err != nil {
		t.Fatal(err)
	}
	// The channels only observers follow exist before the first publish.
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, ch := range []string{agent.OutputChannel("streamer"), agent.StreamChannel("streamer")} {
		topic, _ := kafka.Topic(opts.TopicPrefix, ch)
		topics, err := kadm.NewClient(cl).ListTopics(t.Context(), topic)
		if err != nil {
			t.Fatal(err)
		}
		if !topics.Has(topic) || topics[topic].Err != nil {
			t.Errorf("after Serve, the topic of %s does not exist: %v", ch, topics)
		}
	}
	caller := agent.NewRuntime(calf.NewClient(open(), nil), st, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var kinds []agent.EventKind
	for ev, err := range a.RunStream(ctx, caller, "add 2 and 3", nil) {
		if err != nil {
			t.Fatalf("RunStream: %v (events so far: %v)", err, kinds)
		}
		kinds = append(kinds, ev.Kind)
	}
	count := map[agent.EventKind]int{}
	for _, k := range kinds {
		count[k]++
	}
	if count[agent.EventInference] != 2 || count[agent.EventToolCall] != 1 || count[agent.EventToolResult] != 1 || count[agent.EventOutput] != 1 {
		t.Errorf("events of the first run = %v; want 2 inferences, a tool call, its result and the output", kinds)
	}
}
