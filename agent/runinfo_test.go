package agent_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/tool"
)

// A run's view: whole from LoadRun, partial but counting every message
// of the run from its record alone, and the caller's to change.
func TestRunInfo(t *testing.T) {
	e := newEnv(t, nil)
	ctx := runCtx(t)
	const ticks = 12
	n := 0
	tick := tool.Must(tool.New("tick", "Tick.", func(_ context.Context, in echoArgs) (string, error) { return "tock " + in.Text, nil }))
	m := modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
		if n++; n <= ticks {
			return modeltest.ToolCalls(modeltest.Call(fmt.Sprintf("t%d", n), "tick", fmt.Sprintf(`{"text":"%d"}`, n))), nil
		}
		return modeltest.Text("ticked"), nil
	})
	a := agent.Must(agent.New("ticker", m, &agent.Options{Tools: []tool.Tool{tick}}))
	if err := a.Serve(t.Context(), e.rt, nil); err != nil {
		t.Fatal(err)
	}
	out, err := a.Run(ctx, e.rt, "tick", nil)
	if err != nil {
		t.Fatal(err)
	}
	info, err := e.rt.LoadAgentRun(ctx, out.RunID)
	if err != nil {
		t.Fatal(err)
	}
	want := 1 + 2*ticks + 1
	if info.ID != out.RunID || info.Agent != "ticker" || info.Status != agent.RunComplete || info.Partial ||
		len(info.Messages) != want || info.Own != want || info.HistoryLen != 0 || len(info.ToolCalls) != ticks ||
		string(info.Output) != `"ticked"` || info.Step != ticks+1 || info.Usage.Requests != ticks+1 {
		t.Errorf("LoadRun: id %s, status %s, partial %v, %d messages, own %d, %d tool calls, output %s, step %d, usage %+v",
			info.ID, info.Status, info.Partial, len(info.Messages), info.Own, len(info.ToolCalls), info.Output, info.Step, info.Usage)
	}
	rec, err := e.store.Get(ctx, store.KindRun, out.RunID)
	if err != nil {
		t.Fatal(err)
	}
	bare, err := agent.DecodeRunInfo(rec.Data)
	if err != nil {
		t.Fatal(err)
	}
	if !bare.Partial || bare.Own != want || len(bare.Messages) >= want || len(bare.ToolCalls) > ticks ||
		bare.Messages[len(bare.Messages)-1].Text() != "ticked" {
		t.Errorf("DecodeRunInfo: partial %v, own %d, %d messages, %d tool calls", bare.Partial, bare.Own, len(bare.Messages), len(bare.ToolCalls))
	}
	// The view is a copy.
	info.Messages[0].Parts[0].Text = "changed"
	info.ToolCalls[0].Name = "changed"
	again, err := e.rt.LoadAgentRun(ctx, out.RunID)
	if err != nil || again.Messages[0].Text() != "tick" || again.ToolCalls[0].Name != "tick" {
		t.Errorf("LoadRun after changing a view: %v", err)
	}
	// What is not a run's record is refused.
	for _, data := range []string{`{}`, `{"run_id":"r","agent":"a","status":"weird","step":1}`, `not json`} {
		if _, err := agent.DecodeRunInfo([]byte(data)); err == nil {
			t.Errorf("DecodeRunInfo(%s) accepted it", data)
		}
	}
}
