package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket/wsjson"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/agent/approval"
	"github.com/calf-go/calf/server"
)

// A request that does not stream, whose run parks on an approval, is
// answered at once with a 409 approval_pending naming the run and the
// approval; the run stays parked, and once the approval is answered over
// the bridge it goes on to its answer.
func TestApprovalPendingNotStreamed(t *testing.T) {
	for _, c := range []struct{ name, path, body string }{
		{"chat", "/v1/chat/completions", `{"model":"calc","messages":[{"role":"user","content":"add 2 and 3"}]}`},
		{"responses", "/v1/responses", `{"model":"calc","input":"add 2 and 3"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			hs, rt := newApprovalServer(t)
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			status, body, h := do(t, "POST", hs.URL+c.path, "tok-ann", c.body, nil)
			run := h.Get(server.RunHeader)
			var e struct {
				Error struct {
					Message   string `json:"message"`
					Type      string `json:"type"`
					Code      string `json:"code"`
					RunID     string `json:"run_id"`
					Approvals []struct {
						ID       string          `json:"id"`
						ToolName string          `json:"tool_name"`
						Args     json.RawMessage `json:"arguments"`
					} `json:"approvals"`
				} `json:"error"`
			}
			if err := json.Unmarshal([]byte(body), &e); err != nil || status != http.StatusConflict || e.Error.Code != "approval_pending" || run == "" || e.Error.RunID != run {
				t.Fatalf("%d %s (%v)", status, body, err)
			}
			pending, err := approval.List(ctx, rt.Store(), run, approval.Pending)
			if err != nil || len(pending) != 1 {
				t.Fatalf("pending approvals %+v %v", pending, err)
			}
			id := pending[0].ID
			if len(e.Error.Approvals) != 1 || e.Error.Approvals[0].ID != id || e.Error.Approvals[0].ToolName != "add" || !strings.Contains(e.Error.Message, id) || !strings.Contains(e.Error.Message, "/v1/ws") {
				t.Errorf("the error %s does not name approval %s and how to answer it", body, id)
			}

			// Answered over the bridge, the run goes on to its answer.
			ws, _, err := dialWS(t, ctx, hs.URL, []string{server.WSProtocol, "bearer.tok-ann"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer ws.CloseNow()
			if err := wsjson.Write(ctx, ws, map[string]any{"type": "approve", "approval": id, "approve": true}); err != nil {
				t.Fatal(err)
			}
			if m := readWS(t, ctx, ws); m.Type != "answered" || m.Run != run {
				t.Fatalf("the approval's answer: %+v", m)
			}
			req, _ := http.NewRequestWithContext(ctx, "GET", hs.URL+"/v1/runs/"+run+"/events", nil)
			req.Header.Set("Authorization", "Bearer tok-ann")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			data, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(data), `Done: 5`) {
				t.Errorf("the run's events after the approval:\n%s", data)
			}
			if st, err := rt.LoadAgentRun(ctx, run); err != nil || st.Status != agent.RunComplete {
				t.Errorf("the run: %+v %v", st, err)
			}
		})
	}
}
