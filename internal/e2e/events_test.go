package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/eventlog"
	"github.com/calf-go/calf/runner"
	"github.com/calf-go/calf/server"
)

// streamed is one event read from a run's event stream.
type streamed struct {
	id, name, data string
}

// openRunEvents opens the event stream of run on the server at url,
// after the event last (none: from the start), and reads it onto the
// returned slice's guard until the stream ends.
func openRunEvents(t *testing.T, ctx context.Context, url, run, last string, got *[]streamed, mu *sync.Mutex) <-chan struct{} {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", url+"/v1/runs/"+run+"/events", nil)
	if last != "" {
		req.Header.Set("Last-Event-ID", last)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("events of %s: %d", run, resp.StatusCode)
	}
	return readStream(resp, got, mu)
}

// readStream reads the server-sent events of resp onto got, guarded by
// mu, until an "end" event or the end of the body.
func readStream(resp *http.Response, got *[]streamed, mu *sync.Mutex) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer resp.Body.Close()
		r := bufio.NewReader(resp.Body)
		var ev streamed
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			line = strings.TrimRight(line, "\n")
			switch {
			case strings.HasPrefix(line, "id: "):
				ev.id = line[4:]
			case strings.HasPrefix(line, "event: "):
				ev.name = line[7:]
			case strings.HasPrefix(line, "data: "):
				ev.data = line[6:]
			case line == "" && ev.data != "":
				mu.Lock()
				*got = append(*got, ev)
				mu.Unlock()
				if ev.name == "end" {
					return
				}
				ev = streamed{}
			}
		}
	}()
	return done
}

// killedWorkerServer starts, on NATS with PostgreSQL, a server of the
// caller's agent that records the event log, and a first worker that
// records it too and dies (SIGKILL-like crash) once the run's tool result
// is recorded.
func killedWorkerServer(t *testing.T) (h *harness, cfg *workerConfig, c *caller, log *eventlog.Log, hs *httptest.Server, first *proc) {
	t.Helper()
	h = newHarness(t)
	cfg = h.config(natsPostgres)
	fastFailover(cfg)
	cfg.EventLog = true
	c = newCaller(t, cfg)
	log = eventlog.New(c.rt.Client(), c.store)
	if err := log.Record(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	s, err := server.New(c.rt, []runner.Runner{runner.Agent(c.agent)}, &server.Options{Log: log})
	if err != nil {
		t.Fatal(err)
	}
	hs = httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	crashing := *cfg
	crashing.Crash = "tool_recorded"
	first = h.start(&crashing)
	h.ready(first)
	return h, cfg, c, log, hs, first
}

// lastOf returns how many events got holds, and the id of the last.
func lastOf(got *[]streamed, mu *sync.Mutex) (int, string) {
	mu.Lock()
	defer mu.Unlock()
	if len(*got) == 0 {
		return 0, ""
	}
	return len(*got), (*got)[len(*got)-1].id
}

// A run's event stream across a kill -9 of the worker on NATS with
// PostgreSQL: the worker records the event log beside the test process,
// dies in the middle of the run, and a second worker finishes it; the
// client, whose connection dropped meanwhile, resumes by Last-Event-ID and
// has every event of the run once, in the log's order, to the output.
func TestRunEventsAcrossKillNATSPostgres(t *testing.T) {
	h, cfg, c, log, hs, first := killedWorkerServer(t)
	id := "events-" + calf.NewID()[:12]
	t.Cleanup(func() { _ = log.Delete(context.WithoutCancel(t.Context()), id) })
	res := c.run(t, id)

	var mu sync.Mutex
	var got []streamed
	ctx1, drop := context.WithCancel(t.Context())
	done := openRunEvents(t, ctx1, hs.URL, id, "", &got, &mu)
	h.waitEvent("crash", func(ev event) bool { return ev.Ev == "crash" && ev.Run == id })
	h.waitExit(first)
	// The client's connection drops while no worker serves the run.
	drop()
	<-done
	before, last := lastOf(&got, &mu)

	second := h.start(cfg)
	h.ready(second)
	checkW1(t, id, await(t, id, res))
	select {
	case <-openRunEvents(t, t.Context(), hs.URL, id, last, &got, &mu):
	case <-time.After(waitTimeout):
		t.Fatal("the resumed stream did not end")
	}

	all, err := log.Read(t.Context(), id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(got); n == 0 || got[n-1].name != "end" {
		t.Fatalf("the stream did not end with an end event: %v", got)
	}
	got = got[:len(got)-1]
	if len(got) != len(all) {
		t.Fatalf("%d events streamed (%d before the drop), the log has %d", len(got), before, len(all))
	}
	seen := map[string]bool{}
	var channels []string
	for i, ev := range got {
		var e eventlog.Event
		if err := json.Unmarshal([]byte(ev.data), &e); err != nil {
			t.Fatal(err)
		}
		if ev.id != all[i].ID() || e.Seq != int64(i+1) || e.Message.ID != all[i].Message.ID {
			t.Errorf("event %d: id %q seq %d message %s; the log's %d is %q %s", i, ev.id, e.Seq, e.Message.ID, i, all[i].ID(), all[i].Message.ID)
		}
		if seen[e.Message.ID] {
			t.Errorf("message %s streamed twice", e.Message.ID)
		}
		seen[e.Message.ID] = true
		channels = append(channels, strings.TrimPrefix(e.Message.Channel, "calf.agent."+cfg.Agent+"."))
	}
	cs := strings.Join(channels, " ")
	if !strings.HasPrefix(cs, "input inference") || !strings.HasSuffix(cs, "output") || !strings.Contains(cs, "tool_call.add") || !strings.Contains(cs, "tool_result") {
		t.Errorf("channels %q", cs)
	}
	t.Logf("%d events, %d before the connection dropped: %s", len(got), before, cs)
}

// An OpenAI chat-completions stream across a kill -9 of the worker on NATS
// with PostgreSQL: the client asks that the run go on should it drop
// (Calf-On-Disconnect), its connection drops while no worker serves the
// run, and it sends the request again with Last-Event-ID once a second
// worker took over: every chunk once, numbered without a gap, the text
// ending with the run's answer.
func TestOpenAIStreamAcrossKillNATSPostgres(t *testing.T) {
	h, cfg, c, log, hs, first := killedWorkerServer(t)
	rn := runner.Agent(c.agent)

	body := `{"model":"` + cfg.Agent + `","stream":true,"messages":[{"role":"user","content":"` + prompt + `"}]}`
	post := func(ctx context.Context, last string) *http.Response {
		req, _ := http.NewRequestWithContext(ctx, "POST", hs.URL+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(server.OnDisconnectHeader, "continue")
		if last != "" {
			req.Header.Set("Last-Event-ID", last)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 {
			t.Fatalf("chat completions: %d", resp.StatusCode)
		}
		return resp
	}
	var mu sync.Mutex
	var got []streamed
	ctx1, drop := context.WithCancel(t.Context())
	resp := post(ctx1, "")
	id := resp.Header.Get(server.RunHeader)
	c.mu.Lock()
	c.runs = append(c.runs, id)
	c.mu.Unlock()
	t.Cleanup(func() { _ = log.Delete(context.WithoutCancel(t.Context()), id) })
	done := readStream(resp, &got, &mu)
	h.waitEvent("crash", func(ev event) bool { return ev.Ev == "crash" && ev.Run == id })
	h.waitExit(first)
	drop()
	<-done
	before, last := lastOf(&got, &mu)

	second := h.start(cfg)
	h.ready(second)
	ctx2, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	<-readStream(post(ctx2, last), &got, &mu)
	res, err := rn.Status(t.Context(), c.rt, id)
	if err != nil || res.Status != runner.Complete {
		t.Fatalf("the run: %+v %v", res, err)
	}
	if n := len(got); n == 0 || got[n-1].data != "[DONE]" {
		t.Fatalf("the stream did not end with [DONE]: %v", got)
	}
	var text strings.Builder
	for i, ev := range got {
		if want := fmt.Sprintf("%s/%d", id, i); ev.id != want {
			t.Fatalf("chunk %d has id %q, want %q (%d before the drop)", i, ev.id, want, before)
		}
		var chunk struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if json.Unmarshal([]byte(ev.data), &chunk) == nil && len(chunk.Choices) > 0 {
			text.WriteString(chunk.Choices[0].Delta.Content)
		}
	}
	if res.Text == "" || !strings.HasSuffix(text.String(), res.Text) {
		t.Errorf("the streamed text %q does not end with the answer %q", text.String(), res.Text)
	}
	t.Logf("%d chunks, %d before the connection dropped: %q", len(got), before, text.String())
}
