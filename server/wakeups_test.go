package server_test

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/server"
)

// laterModel schedules a follow-up an hour ahead, then says so.
func laterModel() model.Model {
	return modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == model.RoleTool {
			return modeltest.Text("scheduled: " + last.Text()), nil
		}
		return modeltest.ToolCalls(modeltest.Call("w1", agent.WakeUpToolName, `{"after":"1h","note":"check the build"}`)), nil
	})
}

// The follow-ups of a session: its owner lists them and cancels one
// (its id, with its slashes, escaped in the path), which is then gone;
// another user finds neither the session's list nor the follow-up (404),
// and a request without a token is refused (401).
func TestWakeUpsAPI(t *testing.T) {
	rt := testRuntime(t)
	a := agent.Must(agent.New("minder", laterModel(), &agent.Options{WakeUps: &agent.WakeUps{}}))
	hs, _ := serveAgent(t, rt, a, false, &server.Options{Tokens: map[string]string{"tok-ann": "ann", "tok-bob": "bob"}, RateLimit: -1})
	u := hs.URL
	chat := `{"model":"minder","messages":[{"role":"user","content":"watch the build"}]}`
	if code, body, _ := do(t, "POST", u+"/v1/chat/completions", "tok-ann", chat, map[string]string{server.SessionHeader: "ann-s"}); code != 200 || !strings.Contains(body, "Follow-up scheduled") {
		t.Fatalf("the run that schedules a follow-up: %d %s", code, body)
	}
	code, body, _ := do(t, "GET", u+"/v1/sessions/ann-s/wakeups", "tok-ann", "", nil)
	ups := decode[struct{ WakeUps []agent.WakeUp }](t, body).WakeUps
	if code != 200 || len(ups) != 1 || ups[0].Note != "check the build" || ups[0].Agent != "minder" || ups[0].SessionID != "ann-s" || ups[0].Due.IsZero() {
		t.Fatalf("ann's follow-ups: %d %s", code, body)
	}
	id := ups[0].ID
	cancel := u + "/v1/sessions/ann-s/wakeups/" + url.PathEscape(id)

	for _, c := range []struct{ method, url, token string }{
		{"GET", u + "/v1/sessions/ann-s/wakeups", ""},
		{"DELETE", cancel, ""},
	} {
		if code, body, _ := do(t, c.method, c.url, c.token, "", nil); code != 401 {
			t.Errorf("%s %s without a token: %d %s", c.method, c.url, code, body)
		}
	}
	for _, c := range []struct{ method, url string }{
		{"GET", u + "/v1/sessions/ann-s/wakeups"},
		{"DELETE", cancel},
		{"GET", u + "/v1/sessions/nope/wakeups"},
	} {
		if code, body, _ := do(t, c.method, c.url, "tok-bob", "", nil); code != 404 {
			t.Errorf("bob: %s %s: %d %s", c.method, c.url, code, body)
		}
	}
	if code, body, _ := do(t, "DELETE", u+"/v1/sessions/ann-s/wakeups/wakeup/minder/ann-s/nope/w1", "tok-ann", "", nil); code != 404 {
		t.Errorf("an unknown follow-up: %d %s", code, body)
	}
	if code, body, _ := do(t, "DELETE", cancel, "tok-ann", "", nil); code != 200 || !strings.Contains(body, `"cancelled":true`) {
		t.Fatalf("ann cancels: %d %s", code, body)
	}
	if code, body, _ := do(t, "GET", u+"/v1/sessions/ann-s/wakeups", "tok-ann", "", nil); code != 200 || !strings.Contains(body, `"wakeups":[]`) {
		t.Errorf("after the cancel: %d %s", code, body)
	}
	if left, err := rt.WakeUps(t.Context(), "minder", "ann-s"); err != nil || len(left) != 0 {
		t.Errorf("the runtime still has %v (%v)", left, err)
	}
	if code, body, _ := do(t, "DELETE", cancel, "tok-ann", "", nil); code != 404 {
		t.Errorf("cancelled again: %d %s", code, body)
	}
	// The id unescaped, its slashes as path segments, names it too.
	if code, body, _ := do(t, "DELETE", u+"/v1/sessions/ann-s/wakeups/"+id, "tok-ann", "", nil); code != 404 || !strings.Contains(body, "no follow-up") {
		t.Errorf("cancelled again, unescaped: %d %s", code, body)
	}
}
