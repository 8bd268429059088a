package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/agent/approval"
	"github.com/calf-go/calf/eventlog"
	"github.com/calf-go/calf/server"
)

type wsMsg struct {
	Type    string          `json:"type"`
	ID      string          `json:"id"`
	Run     string          `json:"run"`
	Event   *eventlog.Event `json:"event"`
	Message string          `json:"message"`
}

func dialWS(t *testing.T, ctx context.Context, url string, protocols []string, header http.Header) (*websocket.Conn, *http.Response, error) {
	t.Helper()
	return websocket.Dial(ctx, "ws"+strings.TrimPrefix(url, "http")+"/v1/ws", &websocket.DialOptions{Subprotocols: protocols, HTTPHeader: header})
}

func readWS(t *testing.T, ctx context.Context, c *websocket.Conn) wsMsg {
	t.Helper()
	var m wsMsg
	if err := wsjson.Read(ctx, c, &m); err != nil {
		t.Fatalf("read: %v", err)
	}
	return m
}

// The WebSocket bridge: a run started in a session, its events streamed,
// its approval answered, the rest streamed to the end; a second connection
// resumes after an event and gets the rest once, in order.
func TestWebSocketBridge(t *testing.T) {
	hs, rt := newApprovalServer(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c, _, err := dialWS(t, ctx, hs.URL, []string{server.WSProtocol, "bearer.tok-ann"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	if err := wsjson.Write(ctx, c, map[string]any{"type": "run", "id": "m1", "agent": "calc", "session": "ws-1", "text": "add 2 and 3"}); err != nil {
		t.Fatal(err)
	}
	started := readWS(t, ctx, c)
	if started.Type != "started" || started.ID != "m1" || started.Run == "" {
		t.Fatalf("started: %+v", started)
	}
	run := started.Run
	var seqs []int64
	var channels []string
	for ended := false; !ended; {
		m := readWS(t, ctx, c)
		switch m.Type {
		case "event":
			seqs = append(seqs, m.Event.Seq)
			channels = append(channels, strings.TrimPrefix(m.Event.Message.Channel, "calf.agent.calc."))
			if ev, err := agent.DecodeEvent(m.Event.Message); err == nil && ev.Kind == agent.EventApproval && ev.Approval.Status == approval.Pending {
				if err := wsjson.Write(ctx, c, map[string]any{"type": "approve", "id": "a1", "approval": ev.Approval.ID, "approve": true}); err != nil {
					t.Fatal(err)
				}
			}
		case "answered":
			if m.ID != "a1" || m.Run != run {
				t.Errorf("answered %+v", m)
			}
		case "end":
			ended = true
		default:
			t.Fatalf("unexpected %+v", m)
		}
	}
	for i, s := range seqs {
		if s != int64(i+1) {
			t.Fatalf("sequence numbers %v", seqs)
		}
	}
	if cs := strings.Join(channels, " "); !strings.HasPrefix(cs, "input inference") || !strings.Contains(cs, "approval") || !strings.Contains(cs, "tool_result") || !strings.HasSuffix(cs, "output") {
		t.Errorf("channels %q", cs)
	}
	out, err := rt.LoadAgentRun(ctx, run)
	if err != nil || out.Status != agent.RunComplete {
		t.Fatalf("the run: %+v %v", out, err)
	}

	// Resume on a new connection after the third event.
	c2, _, err := dialWS(t, ctx, hs.URL, []string{server.WSProtocol, "bearer.tok-ann"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.CloseNow()
	if err := wsjson.Write(ctx, c2, map[string]any{"type": "follow", "run": run, "after": 3}); err != nil {
		t.Fatal(err)
	}
	var rest []int64
	for {
		m := readWS(t, ctx, c2)
		if m.Type == "end" {
			break
		}
		if m.Type != "event" {
			t.Fatalf("unexpected %+v", m)
		}
		rest = append(rest, m.Event.Seq)
	}
	if len(rest) != len(seqs)-3 || rest[0] != 4 {
		t.Errorf("resumed after 3: %v (all: %v)", rest, seqs)
	}
}

// Hostile WebSocket clients: a foreign origin, no token, another user's
// run, malformed and unknown messages, an oversized message.
func TestWebSocketHostile(t *testing.T) {
	hs, _ := newApprovalServer(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	ann := []string{server.WSProtocol, "bearer.tok-ann"}
	if _, resp, err := dialWS(t, ctx, hs.URL, ann, http.Header{"Origin": {"https://evil.example"}}); err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("a foreign origin: %v %v", resp, err)
	}
	if _, resp, err := dialWS(t, ctx, hs.URL, []string{server.WSProtocol}, nil); err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("no token: %v %v", resp, err)
	}
	if _, resp, err := dialWS(t, ctx, hs.URL, []string{server.WSProtocol, "bearer.tok-eve"}, nil); err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a wrong token: %v %v", resp, err)
	}
	// Ann starts a run; Bob can neither follow it nor use her session.
	c, _, err := dialWS(t, ctx, hs.URL, ann, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	_ = wsjson.Write(ctx, c, map[string]any{"type": "run", "agent": "calc", "session": "ann-ws", "text": "add"})
	run := readWS(t, ctx, c).Run
	bob, _, err := dialWS(t, ctx, hs.URL, []string{server.WSProtocol, "bearer.tok-bob"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer bob.CloseNow()
	for _, msg := range []map[string]any{
		{"type": "follow", "run": run},
		{"type": "run", "agent": "calc", "session": "ann-ws", "text": "hi"},
		{"type": "cancel", "agent": "calc", "run": run},
	} {
		_ = wsjson.Write(ctx, bob, msg)
		if m := readWS(t, ctx, bob); m.Type != "error" || m.Message != "no such session or run" {
			t.Errorf("bob's %v: %+v", msg["type"], m)
		}
	}
	// Malformed and unknown messages get errors; the connection stays.
	_ = bob.Write(ctx, websocket.MessageText, []byte(`{"type":`))
	if m := readWS(t, ctx, bob); m.Type != "error" || !strings.Contains(m.Message, "not a valid message") {
		t.Errorf("malformed: %+v", m)
	}
	for _, c := range []struct {
		msg  map[string]any
		says string
	}{
		{map[string]any{"type": "launch"}, "unknown message type"},
		{map[string]any{"type": "run", "agent": "nope", "session": "s", "text": "x"}, "no agent"},
		{map[string]any{"type": "run", "agent": "calc", "session": "../../x", "text": "x"}, "Calf-Session-Id"},
		{map[string]any{"type": "run", "agent": "calc", "session": "b1", "text": " "}, "empty"},
		{map[string]any{"type": "approve", "approval": "nope", "approve": true}, "no approval"},
	} {
		_ = wsjson.Write(ctx, bob, c.msg)
		if m := readWS(t, ctx, bob); m.Type != "error" || !strings.Contains(m.Message, c.says) {
			t.Errorf("%v: %+v, want an error with %q", c.msg, m, c.says)
		}
	}
	// A message over the limit closes the connection with 1009.
	big, _ := json.Marshal(map[string]any{"type": "run", "agent": "calc", "session": "b2", "text": strings.Repeat("x", 70<<10)})
	_ = bob.Write(ctx, websocket.MessageText, big)
	var m wsMsg
	if err := wsjson.Read(ctx, bob, &m); websocket.CloseStatus(err) != websocket.StatusMessageTooBig {
		t.Errorf("an oversized message: %v", err)
	}
}

// Another user's approval looks like one that does not exist: over the
// bridge, the same error as for an unknown id; over AG-UI, the same status
// and message. The approval stays pending.
func TestApprovalOfAnotherUser(t *testing.T) {
	hs, rt := newApprovalServer(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	ann, _, err := dialWS(t, ctx, hs.URL, []string{server.WSProtocol, "bearer.tok-ann"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ann.CloseNow()
	if err := wsjson.Write(ctx, ann, map[string]any{"type": "run", "agent": "calc", "session": "ann-a", "text": "add"}); err != nil {
		t.Fatal(err)
	}
	id := ""
	for id == "" {
		m := readWS(t, ctx, ann)
		if m.Type == "error" || m.Type == "end" {
			t.Fatalf("ann's run: %+v", m)
		}
		if m.Type != "event" {
			continue
		}
		if ev, err := agent.DecodeEvent(m.Event.Message); err == nil && ev.Kind == agent.EventApproval && ev.Approval.Status == approval.Pending {
			id = ev.Approval.ID
		}
	}
	const unknown = "run-0000/call_0"
	bob, _, err := dialWS(t, ctx, hs.URL, []string{server.WSProtocol, "bearer.tok-bob"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer bob.CloseNow()
	answer := func(approval string) wsMsg {
		if err := wsjson.Write(ctx, bob, map[string]any{"type": "approve", "id": "b1", "approval": approval, "approve": true}); err != nil {
			t.Fatal(err)
		}
		return readWS(t, ctx, bob)
	}
	theirs, none := answer(id), answer(unknown)
	none.Message = strings.ReplaceAll(none.Message, unknown, id)
	if theirs != none || theirs.Type != "error" {
		t.Errorf("bridge: another user's approval %+v, an unknown one %+v", theirs, none)
	}

	resume := func(approval string) (int, string) {
		status, body, _ := do(t, "POST", hs.URL+"/agui/calc", "tok-bob", `{"threadId":"bob-t","runId":"r","messages":[],"resume":[{"interruptId":"`+approval+`","status":"resolved"}]}`, nil)
		return status, body
	}
	s1, b1 := resume(id)
	s2, b2 := resume(unknown)
	if b2 = strings.ReplaceAll(b2, unknown, id); s1 != s2 || b1 != b2 {
		t.Errorf("AG-UI: another user's approval %d %s, an unknown one %d %s", s1, b1, s2, b2)
	}
	if a, err := approval.Get(ctx, rt.Store(), id); err != nil || a.Status != approval.Pending {
		t.Errorf("ann's approval after bob's answers: %+v %v", a, err)
	}
}
