package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket/wsjson"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/eventlog"
	"github.com/calf-go/calf/internal/testwait"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/server"
)

// sseEvent is one server-sent event.
type sseEvent struct {
	id, name, data string
}

// readEvents reads server-sent events from body onto a channel, closed at
// the end of the body.
func readEvents(body *bufio.Reader) <-chan sseEvent {
	out := make(chan sseEvent)
	go func() {
		defer close(out)
		var ev sseEvent
		for {
			line, err := body.ReadString('\n')
			if err != nil {
				return
			}
			line = strings.TrimRight(line, "\n")
			switch {
			case strings.HasPrefix(line, "id: "):
				ev.id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "event: "):
				ev.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				ev.data = strings.TrimPrefix(line, "data: ")
			case line == "" && ev.data != "":
				out <- ev
				ev = sseEvent{}
			}
		}
	}()
	return out
}

// getStream opens an event stream with token and last (Last-Event-ID).
func getStream(t *testing.T, ctx context.Context, url, token, last string) (*http.Response, <-chan sseEvent) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	if last != "" {
		req.Header.Set("Last-Event-ID", last)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp, readEvents(bufio.NewReader(resp.Body))
}

// A run's event stream, dropped in the middle of the run and resumed by
// Last-Event-ID, gives every event of the run once, in order, up to the
// output; another user cannot read it.
func TestRunEventsResume(t *testing.T) {
	rt := testRuntime(t)
	gate := make(chan struct{})
	m := &wordModel{answer: func(req *model.Request) (string, error) {
		<-gate
		return "the answer is 42", nil
	}}
	hs, log := serveAgent(t, rt, agent.Must(agent.New("slow", m, nil)), true, &server.Options{Tokens: map[string]string{"tok-ann": "ann", "tok-bob": "bob"}})

	// Start a streamed chat: its headers name the run.
	req, _ := http.NewRequestWithContext(t.Context(), "POST", hs.URL+"/v1/chat/completions", strings.NewReader(`{"model":"slow","stream":true,"messages":[{"role":"user","content":"q"}]}`))
	req.Header.Set("Authorization", "Bearer tok-ann")
	chat, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer chat.Body.Close()
	run := chat.Header.Get(server.RunHeader)
	if run == "" {
		t.Fatal("no run id")
	}
	url := hs.URL + "/v1/runs/" + run + "/events"

	if resp, _ := getStream(t, t.Context(), url, "tok-bob", ""); resp.StatusCode != 404 {
		t.Errorf("bob reads ann's run: %d", resp.StatusCode)
	}
	if resp, _ := getStream(t, t.Context(), url, "tok-ann", "other/3"); resp.StatusCode != 400 {
		t.Errorf("a Last-Event-ID of another run: %d", resp.StatusCode)
	}

	// First connection: the events before the model answers, then drop it.
	ctx1, drop := context.WithCancel(t.Context())
	resp, evs := getStream(t, ctx1, url, "tok-ann", "")
	if resp.StatusCode != 200 {
		t.Fatalf("events: %d", resp.StatusCode)
	}
	var got []sseEvent
	timeout := time.After(30 * time.Second)
	for len(got) < 2 {
		select {
		case ev := <-evs:
			got = append(got, ev)
		case <-timeout:
			t.Fatalf("events so far: %v", got)
		}
	}
	drop()
	close(gate)
	// The run goes on to its end while nobody listens.
	testwait.ForErr(t, 30*time.Second, "the run to end", func() error {
		st, err := rt.LoadAgentRun(t.Context(), run)
		if err == nil && !st.Status.Terminal() {
			err = fmt.Errorf("status %s", st.Status)
		}
		return err
	})

	// Resume after the last event seen.
	resp, evs = getStream(t, t.Context(), url, "tok-ann", got[len(got)-1].id)
	if resp.StatusCode != 200 {
		t.Fatalf("resume: %d", resp.StatusCode)
	}
	ended := false
	for !ended {
		select {
		case ev, ok := <-evs:
			if !ok {
				t.Fatalf("the stream closed without an end: %v", got)
			}
			if ev.name == "end" {
				ended = true
				break
			}
			got = append(got, ev)
		case <-time.After(30 * time.Second):
			t.Fatalf("events so far: %v", got)
		}
	}
	all, err := log.Read(t.Context(), run, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(all) {
		t.Fatalf("streamed %d events, the log has %d", len(got), len(all))
	}
	var channels []string
	for i, ev := range got {
		if ev.id != all[i].ID() || ev.name != "message" {
			t.Errorf("event %d: id %q name %q, want id %q", i, ev.id, ev.name, all[i].ID())
		}
		var e eventlog.Event
		if err := json.Unmarshal([]byte(ev.data), &e); err != nil || e.Message.ID != all[i].Message.ID {
			t.Errorf("event %d: %v %s", i, err, ev.data)
		}
		channels = append(channels, strings.TrimPrefix(e.Message.Channel, "calf.agent.slow."))
	}
	if cs := strings.Join(channels, " "); !strings.HasPrefix(cs, "input inference stream") || !strings.HasSuffix(cs, "output") {
		t.Errorf("channels %q", cs)
	}
}

// A run id that names no run is not found, on a server without tokens too:
// its event stream, a resumed answer of it, and a follow over the bridge.
// A run started by another caller, which has no owner record, is found,
// even asked for as it starts.
func TestUnknownRun(t *testing.T) {
	rt := testRuntime(t)
	a := agent.Must(agent.New("echo", &wordModel{answer: echoAnswer}, nil))
	hs, _ := serveAgent(t, rt, a, true, nil)
	if status, body, _ := do(t, "GET", hs.URL+"/v1/runs/no-such-run/events", "", "", nil); status != 404 || !strings.Contains(body, `"not_found"`) {
		t.Errorf("the events of an unknown run: %d %s", status, body)
	}
	chat := `{"model":"echo","stream":true,"messages":[{"role":"user","content":"x"}]}`
	if status, body, _ := do(t, "POST", hs.URL+"/v1/chat/completions", "", chat, map[string]string{"Last-Event-ID": "no-such-run/3"}); status != 404 || !strings.Contains(body, `"not_found"`) {
		t.Errorf("an unknown run resumed: %d %s", status, body)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c, _, err := dialWS(t, ctx, hs.URL, []string{server.WSProtocol}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	if err := wsjson.Write(ctx, c, map[string]any{"type": "follow", "id": "f1", "run": "no-such-run"}); err != nil {
		t.Fatal(err)
	}
	if m := readWS(t, ctx, c); m.Type != "error" || m.ID != "f1" || m.Message != "no such session or run" {
		t.Errorf("an unknown run followed: %+v", m)
	}

	// Asked for while it is submitted, before anything recorded it.
	run := "submitted-elsewhere"
	got := make(chan string, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, "GET", hs.URL+"/v1/runs/"+run+"/events", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			got <- err.Error()
			return
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		got <- resp.Status + "\n" + string(data)
	}()
	if _, err := a.Submit(ctx, rt, "hi", &agent.RunOptions{RunID: run}); err != nil {
		t.Fatal(err)
	}
	if body := <-got; !strings.HasPrefix(body, "200") || !strings.HasSuffix(strings.TrimSpace(body), `data: {"run":"`+run+`"}`) {
		t.Errorf("a run submitted as it is asked for:\n%s", body)
	}
}
