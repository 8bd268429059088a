package agent_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/model/modeltest"
	storemem "github.com/calf-go/calf/store/memory"
	"github.com/calf-go/calf/tool"
)

func TestHookDecisionConstructors(t *testing.T) {
	r := tool.TextResult("ok")
	for _, tt := range []struct {
		got, want agent.HookDecision
	}{
		{agent.Allow(), agent.HookDecision{Action: agent.HookAllow}},
		{agent.Deny("no"), agent.HookDecision{Action: agent.HookDeny, Reason: "no"}},
		{agent.Skip(), agent.HookDecision{Action: agent.HookSkip}},
		{agent.Ask("sure?"), agent.HookDecision{Action: agent.HookAsk, Reason: "sure?"}},
		{agent.TransformArguments(json.RawMessage(`{"a":1}`)), agent.HookDecision{Action: agent.HookTransform, Arguments: json.RawMessage(`{"a":1}`)}},
		{agent.TransformResult(r), agent.HookDecision{Action: agent.HookTransform, Result: r}},
		{agent.TransformPrompt("p"), agent.HookDecision{Action: agent.HookTransform, Prompt: "p"}},
	} {
		if diff := cmp.Diff(tt.want, tt.got); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	}
}

// A hook that decides with agent.Deny stops the call, the model told why.
func TestHookDeny(t *testing.T) {
	ctx := t.Context()
	b := memory.New(nil)
	defer b.Close()
	rt := agent.NewRuntime(calf.NewClient(b, nil), storemem.New(), nil)
	ran := false
	push := tool.Must(tool.New("git_push", "Push.", func(context.Context, struct{}) (string, error) {
		ran = true
		return "pushed", nil
	}))
	a := agent.Must(agent.New("dev", modeltest.NewTestModel(
		modeltest.ToolCalls(modeltest.Call("c1", "git_push", `{}`)),
		modeltest.Text("ok"),
	), &agent.Options{
		Tools: []tool.Tool{push},
		Hooks: []agent.Hook{{Name: "guard", Event: agent.HookPreToolUse, Matcher: "git_*", Func: func(context.Context, agent.HookInput) (agent.HookDecision, error) {
			return agent.Deny("pushing is for people"), nil
		}}},
	}))
	if err := a.Serve(ctx, rt, nil); err != nil {
		t.Fatal(err)
	}
	out, err := a.Run(ctx, rt, "push it", nil)
	if err != nil {
		t.Fatal(err)
	}
	if ran || len(out.ToolCalls) != 1 || !strings.Contains(out.ToolCalls[0].Result.Text(), "pushing is for people") {
		t.Errorf("ran %v, calls %+v", ran, out.ToolCalls)
	}
}
