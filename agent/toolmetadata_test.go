package agent_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/tool"
)

// A tool result's metadata travels in the tool result event and stays
// with the run's record of the call, and the model never sees it; a file
// result shows the model the file, labelled with its path.
func TestToolResultMetadata(t *testing.T) {
	for name, o := range map[string]*envOptions{"local": nil, "not local": {wrap: notLocal}} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, o)
			read := tool.Must(tool.New("read", "Read a file.", func(context.Context, struct{}) (*tool.Result, error) {
				r, err := tool.FileResult("notes.txt", []byte("the code is 42"))
				if err != nil {
					return nil, err
				}
				r.Metadata["trace"] = "mdv-7f3a"
				return r, nil
			}))
			var mu sync.Mutex
			var sent []string // the requests, as JSON
			var toolText string
			m := func(_ context.Context, req *model.Request) (*model.Response, error) {
				b, _ := json.Marshal(req)
				mu.Lock()
				defer mu.Unlock()
				sent = append(sent, string(b))
				last := req.Messages[len(req.Messages)-1]
				if last.Role == model.RoleTool {
					toolText = last.Text()
					return modeltest.Text("done"), nil
				}
				return modeltest.ToolCalls(modeltest.Call("call_1", "read", `{}`)), nil
			}
			a := agent.Must(agent.New("reader", modeltest.FunctionModel(m), &agent.Options{Tools: []tool.Tool{read}}))
			if err := a.Serve(t.Context(), e.rt, nil); err != nil {
				t.Fatal(err)
			}
			var result *agent.ToolResultEvent
			var runID string
			for ev, err := range a.RunStream(runCtx(t), e.rt, "read the notes", nil) {
				if err != nil {
					t.Fatal(err)
				}
				runID = ev.RunID
				if ev.Kind == agent.EventToolResult {
					result = ev.ToolResult
				}
			}
			if result == nil || result.Result.Metadata["trace"] != "mdv-7f3a" || result.Result.Metadata["path"] != "notes.txt" {
				t.Fatalf("tool result in the stream: %+v", result)
			}
			info, err := e.rt.LoadAgentRun(t.Context(), runID)
			if err != nil {
				t.Fatal(err)
			}
			if len(info.ToolCalls) != 1 || info.ToolCalls[0].Result == nil || info.ToolCalls[0].Result.Metadata["trace"] != "mdv-7f3a" ||
				info.ToolCalls[0].Result.Metadata["size"] != "14" {
				t.Errorf("the run's tool calls: %+v", info.ToolCalls)
			}
			mu.Lock()
			defer mu.Unlock()
			if toolText != "File notes.txt (text/plain):\nthe code is 42" {
				t.Errorf("the model was given %q", toolText)
			}
			for i, req := range sent {
				if strings.Contains(req, "mdv-7f3a") || strings.Contains(req, "mime_type") {
					t.Errorf("request %d shows the model the metadata: %s", i, req)
				}
			}
		})
	}
}
