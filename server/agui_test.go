package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/agent/approval"
	"github.com/calf-go/calf/internal/peers"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/server"
	"github.com/calf-go/calf/tool"
)

// approvalAgent is "calc", whose add tool asks for approval: its model
// calls add(2, 3), then answers "Done: " and the tool's result, after
// delay.
func approvalAgent(delay time.Duration) *agent.Agent[string] {
	return calcAgent(delay, &agent.Permissions{Mode: agent.PermissionAcceptReads})
}

// calcAgent is approvalAgent with perms: nil lets add run unasked.
func calcAgent(delay time.Duration, perms *agent.Permissions) *agent.Agent[string] {
	answer := modeltest.FunctionModel(func(ctx context.Context, req *model.Request) (*model.Response, error) {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == model.RoleTool {
			select {
			case <-time.After(delay):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return modeltest.Text("Done: " + last.Text()), nil
		}
		return modeltest.ToolCalls(modeltest.Call("call_1", "add", `{"a":2,"b":3}`)), nil
	})
	var steps []modeltest.Step
	for range 20 {
		steps = append(steps, answer)
	}
	add := tool.Must(tool.New("add", "Adds.", func(_ context.Context, in struct {
		A int `json:"a"`
		B int `json:"b"`
	}) (int, error) {
		return in.A + in.B, nil
	}))
	return agent.Must(agent.New("calc", modeltest.NewTestModel(steps...), &agent.Options{
		Tools:       []tool.Tool{add},
		Permissions: perms,
	}))
}

// newApprovalServer serves approvalAgent with an event log, for the
// tokens of ann and bob.
func newApprovalServer(t *testing.T) (*httptest.Server, *agent.Runtime) {
	t.Helper()
	rt := testRuntime(t)
	hs, _ := serveAgent(t, rt, approvalAgent(0), true, &server.Options{Tokens: map[string]string{"tok-ann": "ann", "tok-bob": "bob"}})
	return hs, rt
}

// runAGUIClient runs the AG-UI client script and returns its steps.
func runAGUIClient(t *testing.T, args ...string) map[string]map[string]any {
	t.Helper()
	node := peers.Node(t)
	peers.Package(t, "@ag-ui/client/package.json")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{filepath.Join(peers.Dir(), "agui", "client.mjs")}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("client: %v\n%s\n%s", err, out, stderr.String())
	}
	t.Logf("client:\n%s", out)
	steps := map[string]map[string]any{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var s map[string]any
		if err := json.Unmarshal([]byte(line), &s); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		steps[s["step"].(string)] = s
	}
	return steps
}

func types(s map[string]any) string {
	var ts []string
	for _, v := range s["types"].([]any) {
		ts = append(ts, v.(string))
	}
	return strings.Join(ts, " ")
}

// The official AG-UI client runs an agent: the tool call, the approval as
// an interrupt, the answer as the next run's resume, the tool's result and
// the answer; a denial reaches the model instead.
func TestAGUIClient(t *testing.T) {
	hs, rt := newApprovalServer(t)
	steps := runAGUIClient(t, hs.URL+"/agui/calc", "tok-ann")
	first, second := steps["first"], steps["second"]
	if got := types(first); !strings.HasPrefix(got, "RUN_STARTED") || !strings.Contains(got, "TOOL_CALL_START TOOL_CALL_ARGS TOOL_CALL_END") || !strings.HasSuffix(got, "RUN_FINISHED") || strings.Contains(got, "TOOL_CALL_RESULT") {
		t.Errorf("first run's events %q", got)
	}
	outcome, _ := first["outcome"].(map[string]any)
	if outcome["type"] != "interrupt" {
		t.Fatalf("first outcome %v", first["outcome"])
	}
	intr := outcome["interrupts"].([]any)[0].(map[string]any)
	if intr["reason"] != "tool_approval" || intr["toolCallId"] != "call_1" {
		t.Errorf("interrupt %v", intr)
	}
	a, err := approval.Get(t.Context(), rt.Store(), intr["id"].(string))
	if err != nil || a.Status != approval.Approved {
		t.Errorf("the approval after the second run: %+v, %v", a, err)
	}
	if got := types(second); !strings.HasPrefix(got, "RUN_STARTED TOOL_CALL_RESULT") || !strings.Contains(got, "TEXT_MESSAGE_START TEXT_MESSAGE_CONTENT") || !strings.HasSuffix(got, "TEXT_MESSAGE_END RUN_FINISHED") {
		t.Errorf("second run's events %q", got)
	}
	if second["outcome"] != nil && second["outcome"].(map[string]any)["type"] != "success" {
		t.Errorf("second outcome %v", second["outcome"])
	}
	msgs, _ := json.Marshal(second["messages"])
	if !strings.Contains(string(msgs), `"content":"Done: 5"`) || !strings.Contains(string(msgs), `"toolCalls":["add"]`) {
		t.Errorf("messages %s", msgs)
	}

	steps = runAGUIClient(t, hs.URL+"/agui/calc", "tok-ann", "deny")
	msgs, _ = json.Marshal(steps["second"]["messages"])
	if !strings.Contains(string(msgs), "Done: ") || strings.Contains(string(msgs), "Done: 5") {
		t.Errorf("after a denial: %s", msgs)
	}
}

// AG-UI requests that are malformed, or that answer another user's
// interrupt, are refused.
func TestAGUIBadRequests(t *testing.T) {
	hs, rt := newApprovalServer(t)
	// Ann's run waits for an approval.
	status, body, h := do(t, "POST", hs.URL+"/agui/calc", "tok-ann", `{"threadId":"ann-t","runId":"r1","messages":[{"id":"u","role":"user","content":"add"}]}`, nil)
	if status != 200 || !strings.Contains(body, `"type":"interrupt"`) {
		t.Fatalf("ann's run: %d %s", status, body)
	}
	reqs, err := approval.List(t.Context(), rt.Store(), h.Get(server.RunHeader), approval.Pending)
	if err != nil || len(reqs) != 1 {
		t.Fatalf("approvals: %v %v", reqs, err)
	}
	resume := `{"threadId":"ann-t","runId":"r2","messages":[],"resume":[{"interruptId":"` + reqs[0].ID + `","status":"resolved"}]}`
	for _, c := range []struct {
		name, token, body string
		status            int
		says              string
	}{
		{"malformed", "tok-ann", `{"threadId":`, 400, "not a valid JSON"},
		{"no thread", "tok-ann", `{"runId":"r","messages":[{"role":"user","content":"x"}]}`, 400, "threadId and runId"},
		{"no user message", "tok-ann", `{"threadId":"t","runId":"r","messages":[{"role":"assistant","content":"x"}]}`, 400, "no user message"},
		{"unknown interrupt", "tok-ann", `{"threadId":"ann-t","runId":"r","messages":[],"resume":[{"interruptId":"nope","status":"resolved"}]}`, 404, "no interrupt"},
		{"bad status", "tok-ann", `{"threadId":"ann-t","runId":"r","messages":[],"resume":[{"interruptId":"` + reqs[0].ID + `","status":"maybe"}]}`, 400, "resolved or cancelled"},
		{"bob answers ann's", "tok-bob", strings.Replace(resume, "ann-t", "bob-t", 1), 404, "no interrupt"},
		{"bob in ann's thread", "tok-bob", resume, 404, "no such session or run"},
		{"no token", "", resume, 401, "bearer token"},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, body, _ := do(t, "POST", hs.URL+"/agui/calc", c.token, c.body, nil)
			if status != c.status || !strings.Contains(body, c.says) {
				t.Errorf("got %d %s, want %d with %q", status, body, c.status, c.says)
			}
		})
	}
	if a, _ := approval.Get(t.Context(), rt.Store(), reqs[0].ID); a.Status != approval.Pending {
		t.Errorf("after the refused requests the approval is %s", a.Status)
	}
	// Ann answers: the run goes on to its answer.
	status, body, _ = do(t, "POST", hs.URL+"/agui/calc", "tok-ann", resume, nil)
	if status != 200 || !strings.Contains(body, `"content":"5"`) || !strings.Contains(body, `"delta":" 5"`) || !strings.Contains(body, "RUN_FINISHED") {
		t.Errorf("ann's answer: %d %s", status, body)
	}
}
