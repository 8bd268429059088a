package agent_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/model/modeltest"
	storemem "github.com/calf-go/calf/store/memory"
	"github.com/calf-go/calf/tool"
)

// A run replayed against its recording: the model's recorded responses
// answer, the tools run again, and a replay that asks for more calls than
// were recorded gets ErrRecordingEnded.
func TestReplayRecording(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	newRT := func() *agent.Runtime {
		b := memory.New(nil)
		c := calf.NewClient(b, nil)
		st := storemem.New()
		t.Cleanup(func() { _ = c.Close(); _ = b.Close(); _ = st.Close() })
		return agent.NewRuntime(c, st, nil)
	}
	var adds atomic.Int64
	add := tool.Must(tool.New("add", "Adds.", func(_ context.Context, in struct {
		A int `json:"a"`
		B int `json:"b"`
	}) (int, error) {
		adds.Add(1)
		return in.A + in.B, nil
	}))
	rt := newRT()
	m := modeltest.NewTestModel(
		modeltest.ToolCalls(modeltest.Call("c1", "add", `{"a":2,"b":3}`)),
		modeltest.Text("The sum is 5."),
	)
	a := agent.Must(agent.NewText("calc", m, "Add.", add))
	if err := a.Serve(ctx, rt, nil); err != nil {
		t.Fatal(err)
	}
	out, err := a.Run(ctx, rt, "add 2 and 3", &agent.RunOptions{RunID: "orig"})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := rt.Recording(ctx, "orig")
	if err != nil {
		t.Fatal(err)
	}
	if _, n := rec.Used(); rec.Prompt() != "add 2 and 3" || n != 2 || rec.Name() != "recording:orig" {
		t.Fatalf("recording: prompt %q, %d responses, name %q", rec.Prompt(), n, rec.Name())
	}
	// The replay: another runtime, the same tools, the recording as model.
	replayed := agent.Must(agent.NewText("calc", rec, "Add.", add))
	rt2 := newRT()
	if err := replayed.Serve(ctx, rt2, nil); err != nil {
		t.Fatal(err)
	}
	got, err := replayed.Run(ctx, rt2, rec.Prompt(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if used, _ := rec.Used(); got.Output != out.Output || used != 2 || adds.Load() != 2 {
		t.Errorf("replay: %q (original %q), %d calls, the tool ran %d times", got.Output, out.Output, used, adds.Load())
	}
	// The recording is used up.
	if _, err := rec.Generate(ctx, nil); !errors.Is(err, agent.ErrRecordingEnded) {
		t.Errorf("a call beyond the recording: %v", err)
	}
	if _, err := rt.Recording(ctx, "nope"); err == nil {
		t.Error("the recording of an unknown run")
	}
}
