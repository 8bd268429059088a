package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket/wsjson"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/eventlog"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/runner"
	"github.com/calf-go/calf/server"
)

// gatedModel streams "one two three ", then waits for release, then streams
// "four five six".
type gatedModel struct{ release chan struct{} }

func (m *gatedModel) Name() string { return "gated" }

func (m *gatedModel) Generate(ctx context.Context, req *model.Request) (*model.Response, error) {
	var last *model.Response
	for c, err := range m.GenerateStream(ctx, req) {
		if err != nil {
			return nil, err
		}
		last = c.Response
	}
	return last, nil
}

func (m *gatedModel) GenerateStream(ctx context.Context, _ *model.Request) iter.Seq2[model.Chunk, error] {
	return func(yield func(model.Chunk, error) bool) {
		for i, w := range []string{"one ", "two ", "three ", "four ", "five ", "six"} {
			if i == 3 {
				select {
				case <-m.release:
				case <-ctx.Done():
					yield(model.Chunk{}, ctx.Err())
					return
				}
			}
			if !yield(model.Chunk{Delta: &model.Delta{Text: w}}, nil) {
				return
			}
		}
		r := modeltest.Text("one two three four five six")
		r.Usage = model.Usage{Requests: 1, InputTokens: 5, OutputTokens: 6, TotalTokens: 11}
		yield(model.Chunk{Response: r}, nil)
	}
}

// post sends a streamed request and returns its response and events.
func post(t *testing.T, ctx context.Context, url, token, body string, header map[string]string) (*http.Response, <-chan sseEvent) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		resp.Body.Close()
		t.Fatalf("%s: %s", url, resp.Status)
	}
	return resp, readEvents(bufio.NewReader(resp.Body))
}

// An OpenAI stream dropped in the middle of its run and resumed by
// Last-Event-ID: every event once, in order, numbered without a gap, the
// text whole; chat completions and responses alike. Without
// Calf-On-Disconnect: continue, a dropped stream cancels its run.
func TestOpenAIStreamResume(t *testing.T) {
	const ann, bob = "tok-ann-0123456789", "tok-bob-0123456789"
	for _, c := range []struct {
		name, path, body string
		text             func(data string) string // a delta's text, or ""
	}{
		{"chat", "/v1/chat/completions", `{"model":"gated","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"count"}]}`, func(data string) string {
			var c struct {
				Choices []struct {
					Delta struct {
						Content *string `json:"content"`
					} `json:"delta"`
				} `json:"choices"`
			}
			if json.Unmarshal([]byte(data), &c) != nil || len(c.Choices) == 0 || c.Choices[0].Delta.Content == nil {
				return ""
			}
			return *c.Choices[0].Delta.Content
		}},
		{"responses", "/v1/responses", `{"model":"gated","stream":true,"input":"count"}`, func(data string) string {
			var d struct {
				Type  string `json:"type"`
				Delta string `json:"delta"`
			}
			if json.Unmarshal([]byte(data), &d) != nil || d.Type != "response.output_text.delta" {
				return ""
			}
			return d.Delta
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rt := testRuntime(t)
			m := &gatedModel{release: make(chan struct{})}
			a := agent.Must(agent.New("gated", m, nil))
			hs, _ := serveAgent(t, rt, a, true, &server.Options{Tokens: map[string]string{ann: "ann", bob: "bob"}})
			url := hs.URL + c.path

			// The first connection, dropped after "three".
			ctx, drop := context.WithCancel(t.Context())
			resp, events := post(t, ctx, url, ann, c.body, map[string]string{server.OnDisconnectHeader: "continue"})
			run := resp.Header.Get(server.RunHeader)
			var ids []string
			var text strings.Builder
			for ev := range events {
				ids = append(ids, ev.id)
				text.WriteString(c.text(ev.data))
				if strings.HasSuffix(text.String(), "three ") {
					break
				}
			}
			drop()
			resp.Body.Close()
			if text.String() != "one two three " {
				t.Fatalf("before the drop: %q", text.String())
			}
			close(m.release)

			// Another user, a malformed id, and a request that does not
			// stream cannot resume it.
			last := ids[len(ids)-1]
			for _, h := range []struct {
				token, id, body string
				status          int
			}{
				{bob, last, c.body, 404},
				{ann, "nonsense", c.body, 400},
				{ann, run + "/x", c.body, 400},
				{ann, last, strings.Replace(c.body, `"stream":true`, `"stream":false`, 1), 400},
			} {
				if status, body, _ := do(t, "POST", url, h.token, h.body, map[string]string{"Last-Event-ID": h.id}); status != h.status {
					t.Errorf("resume %q as %s: %d %s", h.id, h.token, status, body)
				}
			}

			// Resumed: the rest, once.
			resp2, events2 := post(t, t.Context(), url, ann, c.body, map[string]string{"Last-Event-ID": last})
			defer resp2.Body.Close()
			if got := resp2.Header.Get(server.RunHeader); got != run {
				t.Errorf("the resumed stream's run %q, want %q", got, run)
			}
			var rest []sseEvent
			for ev := range events2 {
				rest = append(rest, ev)
				text.WriteString(c.text(ev.data))
			}
			for _, ev := range rest {
				ids = append(ids, ev.id)
			}
			for i, id := range ids {
				if want := fmt.Sprintf("%s/%d", run, i); id != want {
					t.Fatalf("event %d has id %q, want %q (ids %v)", i, id, want, ids)
				}
			}
			if text.String() != "one two three four five six" {
				t.Errorf("the text over both connections: %q", text.String())
			}
			end := rest[len(rest)-1].data
			if c.name == "chat" && end != "[DONE]" || c.name == "responses" && !strings.Contains(end, `"response.completed"`) {
				t.Errorf("the resumed stream ends with %s", end)
			}
			if c.name == "responses" {
				// Sequence numbers go on where the first connection stopped.
				for i, ev := range rest {
					var d struct {
						Seq int `json:"sequence_number"`
					}
					if err := json.Unmarshal([]byte(ev.data), &d); err != nil || d.Seq != len(ids)-len(rest)+i {
						t.Errorf("resumed event %d: sequence_number %d, want %d", i, d.Seq, len(ids)-len(rest)+i)
					}
				}
			}

			// By default, a dropped stream cancels its run.
			m.release = make(chan struct{})
			ctx3, drop3 := context.WithCancel(t.Context())
			resp3, events3 := post(t, ctx3, url, ann, c.body, nil)
			run3 := resp3.Header.Get(server.RunHeader)
			<-events3
			drop3()
			resp3.Body.Close()
			deadline := time.Now().Add(10 * time.Second)
			for {
				st, err := rt.LoadAgentRun(t.Context(), run3)
				if err == nil && st.Status == agent.RunCancelled {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the run of a dropped stream: %+v %v", st, err)
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}

// A streamed request for an agent that no process serves ends with an
// error after the start timeout, as a request that waits does, and its
// run is cancelled; so does a run started over the WebSocket bridge or
// AG-UI.
func TestStreamNotServed(t *testing.T) {
	rt := testRuntime(t)
	log := eventlog.New(rt.Client(), rt.Store())
	if err := log.Record(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	a := agent.Must(agent.New("idle", &gatedModel{release: make(chan struct{})}, nil))
	s, err := server.New(rt, []runner.Runner{runner.Agent(a)}, &server.Options{Log: log}) // a is not served
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	defer hs.Close()
	status, body, h := do(t, "POST", hs.URL+"/v1/chat/completions", "", `{"model":"idle","stream":true,"messages":[{"role":"user","content":"hi"}]}`, nil)
	if status != 200 || !strings.Contains(body, "no process serves the agent") || strings.Contains(body, "[DONE]") {
		t.Fatalf("%d %s", status, body)
	}
	st, err := rt.LoadAgentRun(t.Context(), h.Get(server.RunHeader))
	if err != nil || st.Status != agent.RunCancelled {
		t.Errorf("the run: %+v %v", st, err)
	}

	status, body, _ = do(t, "POST", hs.URL+"/agui/idle", "", `{"threadId":"t-1","runId":"r1","messages":[{"id":"u","role":"user","content":"hi"}]}`, nil)
	if status != 200 || !strings.Contains(body, `"RUN_ERROR"`) || !strings.Contains(body, "not_served") {
		t.Errorf("AG-UI: %d %s", status, body)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c, _, err := dialWS(t, ctx, hs.URL, []string{server.WSProtocol}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	if err := wsjson.Write(ctx, c, map[string]any{"type": "run", "id": "m1", "agent": "idle", "session": "ws-idle", "text": "hi"}); err != nil {
		t.Fatal(err)
	}
	for {
		m := readWS(t, ctx, c)
		if m.Type == "error" {
			if !strings.Contains(m.Message, "no process serves the agent") {
				t.Errorf("the bridge's error: %+v", m)
			}
			break
		}
		if m.Type != "started" && m.Type != "event" {
			t.Fatalf("the bridge sent %+v", m)
		}
	}
}
