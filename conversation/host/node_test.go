package host_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/broker/nats"
	"github.com/calf-go/calf/conversation"
	"github.com/calf-go/calf/conversation/host"
	"github.com/calf-go/calf/internal/convid"
	"github.com/calf-go/calf/internal/peers"
	"github.com/calf-go/calf/internal/testwait"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	storemem "github.com/calf-go/calf/store/memory"
)

// natsURL returns the URL of the machine's NATS server, skipping the test
// when it is unreachable, unless CALF_TEST_SERVICES is set.
func natsURL(t *testing.T) string {
	t.Helper()
	u := os.Getenv("CALF_TEST_NATS_URL")
	if u == "" {
		u = "nats://127.0.0.1:4222"
	}
	host := u
	if pu, err := url.Parse(u); err == nil && pu.Host != "" {
		host = pu.Host
	}
	conn, err := net.DialTimeout("tcp", host, 2*time.Second)
	if err != nil {
		if os.Getenv("CALF_TEST_SERVICES") != "" {
			t.Fatalf("NATS at %s is unreachable: %v", u, err)
		}
		t.Skipf("NATS at %s is unreachable: %v", u, err)
	}
	_ = conn.Close()
	return u
}

// openNATS opens a broker on the machine's NATS with a stream and subjects
// of the test's own, deleted when it ends.
func openNATS(t *testing.T, u string, opts *nats.Options) *nats.Broker {
	t.Helper()
	t.Cleanup(func() {
		nc, err := natsgo.Connect(u)
		if err != nil {
			t.Errorf("connect to delete the stream: %v", err)
			return
		}
		defer nc.Close()
		js, _ := jetstream.New(nc)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := js.DeleteStream(ctx, opts.Stream); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
			t.Errorf("delete stream %s: %v", opts.Stream, err)
		}
		if err := js.DeleteKeyValue(ctx, opts.Stream+"_leases"); err != nil && !errors.Is(err, jetstream.ErrBucketNotFound) {
			t.Errorf("delete the lease bucket of %s: %v", opts.Stream, err)
		}
	})
	b, err := nats.Open(t.Context(), u, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// nodeEvent is a line the Node agent prints.
type nodeEvent struct {
	Event         string   `json:"event"`
	ID            string   `json:"id"`
	CorrelationID string   `json:"correlation_id"`
	Command       []string `json:"command"`
	Message       string   `json:"message"`
	Redelivered   bool     `json:"redelivered"`
	Deliveries    int      `json:"deliveries"`
	Error         string   `json:"error"`
}

// nodeAgent is a run of internal/peers/convagent/agent.mjs.
type nodeAgent struct {
	t      *testing.T
	cmd    *exec.Cmd
	events chan nodeEvent
	exited chan struct{}
	seen   []nodeEvent // events read and not yet matched, in order
}

// startNodeAgent starts the Node agent on the broker's stream and waits
// until it consumes.
func startNodeAgent(t *testing.T, u string, opts *nats.Options) *nodeAgent {
	t.Helper()
	cmd := exec.Command(peers.Node(t), peers.ConversationAgent(t), "--server", u, "--stream", opts.Stream,
		"--prefix", opts.Prefix, "--partitions", strconv.Itoa(opts.Partitions), "--prototype", "calc-agent")
	cmd.Stderr = testWriter{t}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	a := &nodeAgent{t: t, cmd: cmd, events: make(chan nodeEvent, 100), exited: make(chan struct{})}
	go func() {
		defer close(a.exited)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			t.Logf("node: %s", sc.Text())
			var ev nodeEvent
			if json.Unmarshal(sc.Bytes(), &ev) == nil {
				a.events <- ev
			}
		}
		_ = cmd.Wait()
	}()
	t.Cleanup(a.kill)
	a.next(func(ev nodeEvent) bool { return ev.Event == "ready" })
	return a
}

// next returns the agent's first event not yet returned for which match
// is true, failing after a while.
func (a *nodeAgent) next(match func(nodeEvent) bool) nodeEvent {
	a.t.Helper()
	if i := slices.IndexFunc(a.seen, match); i >= 0 {
		ev := a.seen[i]
		a.seen = slices.Delete(a.seen, i, i+1)
		return ev
	}
	deadline := time.After(30 * time.Second)
	for {
		select {
		case ev := <-a.events:
			if match(ev) {
				return ev
			}
			a.seen = append(a.seen, ev)
		case <-a.exited:
			a.t.Fatal("the Node agent exited")
		case <-deadline:
			a.t.Fatal("the Node agent did not say what was expected")
		}
	}
}

// kill ends the process with SIGKILL and waits for it.
func (a *nodeAgent) kill() {
	_ = a.cmd.Process.Kill()
	<-a.exited
}

// testWriter writes to the test's log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Logf("node stderr: %s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// calcModel is a conversational agent that uses the calculator: "compute"
// starts it, adds 2 and 3 and divides by zero; "wait" has it sleep.
func calcModel(sleepMS int) modeltest.FunctionModel {
	return func(_ context.Context, req *model.Request) (*model.Response, error) {
		send := func(id string, command ...string) *model.Response {
			args, _ := json.Marshal(map[string]any{"agent": "calc-agent", "command": command})
			return modeltest.ToolCalls(modeltest.Call(id, "send", string(args)))
		}
		switch lastUser(req) {
		case "compute":
			if _, ok := toolResult(req, "start"); !ok {
				return modeltest.ToolCalls(modeltest.Call("start", "start_conversation", `{"prototype":"calc-agent"}`)), nil
			}
			sum, ok := toolResult(req, "add")
			if !ok {
				return send("add", "add", "2", "3"), nil
			}
			div, ok := toolResult(req, "div")
			if !ok {
				return send("div", "div", "1", "0"), nil
			}
			pow, ok := toolResult(req, "pow")
			if !ok {
				return send("pow", "pow", "2", "8"), nil
			}
			return modeltest.Text("2 + 3 = " + sum + "; 1 / 0: " + div + "; pow: " + pow), nil
		case "wait":
			res, ok := toolResult(req, "sleep")
			if !ok {
				return send("sleep", "sleep", strconv.Itoa(sleepMS)), nil
			}
			return modeltest.Text("The calculator: " + res), nil
		}
		return modeltest.Text("?"), nil
	}
}

// TestExternalAgentInNode: a tool agent written in Node.js against the
// wire format alone (internal/peers/convagent), started as its own
// process, serves the external prototype calc-agent on the machine's
// NATS: the conversational agent starts it with start_conversation and
// commands it with send, and the user gets its answers, an error result
// for a bad command among them. Killed (SIGKILL) while a command waits,
// the send ends in a timeout error result for the model after the send
// timeout and the run still answers the user; started again, the agent
// gets the command still pending and answers it on the reply channel, as
// it answers a request sent while no process served.
func TestExternalAgentInNode(t *testing.T) {
	u := natsURL(t)
	peers.ConversationAgent(t) // skip before anything starts when Node or its client is missing
	id := calf.NewID()[:12]
	opts := &nats.Options{Stream: "CALFCONV_" + id, Prefix: "calfconv" + id, Partitions: 4,
		Backoff: func(int) time.Duration { return time.Millisecond }}
	b := openNATS(t, u, opts)

	st := storemem.New()
	convs := conversation.NewConversations(st, nil)
	if err := convs.Prototypes().RegisterAll(t.Context(), []conversation.Prototype{
		{Name: "conversational-agent", SystemPrompt: "You talk with the user.", Subagents: []string{"calc-agent"}},
		{Name: "calc-agent", Kind: conversation.KindExternal, Role: "A calculator: add, sub, mul, div, sleep"},
	}, false); err != nil {
		t.Fatal(err)
	}
	const sendTimeout = 4 * time.Second
	e := newHost(t, b, st, calcModel(1500), &host.Options{SendTimeout: sendTimeout})
	c := e.create()
	calc := convid.InstanceID("calc-agent", c.ID)

	// Every answer of the calculator, as the conversation channel carries
	// it.
	var mu sync.Mutex
	var answers []conversation.ConversationMessage
	if err := e.client.Handle(t.Context(), "calf.conv."+c.ID+"."+calc+"."+c.Entry, func(_ context.Context, msg *calf.Message) error {
		m, err := conversation.DecodeMessage(msg.Data)
		if err != nil {
			return calf.Permanent(err)
		}
		if msg.Metadata.CorrelationID != m.CorrelationID || msg.Key != c.ID {
			t.Errorf("the answer's envelope %+v", msg)
		}
		mu.Lock()
		answers = append(answers, m)
		mu.Unlock()
		return nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	answered := func(corr string) (conversation.ConversationMessage, bool) {
		mu.Lock()
		defer mu.Unlock()
		i := slices.IndexFunc(answers, func(m conversation.ConversationMessage) bool { return m.CorrelationID == corr })
		if i < 0 {
			return conversation.ConversationMessage{}, false
		}
		return answers[i], true
	}

	// The agent is started after the host has prepared its group, as any
	// time: the requests wait for it in the stream.
	agent := startNodeAgent(t, u, opts)
	e.say(c, "compute")
	got := e.wait(c, 1)[0]
	if !strings.Contains(got.Message, "2 + 3 = 5;") || !strings.Contains(got.Message, "1 / 0: calc-agent-"+c.ID+": division by zero;") ||
		!strings.Contains(got.Message, `pow: calc-agent-`+c.ID+`: unknown command "pow"`) {
		t.Fatalf("answer %q", got.Message)
	}

	// Killed while a command waits: the send times out.
	e.say(c, "wait")
	req := agent.next(func(ev nodeEvent) bool {
		return ev.Event == "received" && slices.Equal(ev.Command, []string{"sleep", "1500"})
	})
	agent.kill()
	start := time.Now()
	got = e.wait(c, 2)[1]
	if want := "did not answer within " + sendTimeout.String(); !strings.Contains(got.Message, want) || !strings.HasPrefix(got.Message, "The calculator: ") {
		t.Fatalf("answer %q, want the send's error result %q", got.Message, want)
	}
	if _, ok := answered(req.CorrelationID); ok {
		t.Fatal("the killed agent answered")
	}
	t.Logf("the user was answered %v after the kill", time.Since(start).Round(time.Millisecond))

	// A request sent while no process serves waits for one.
	ch, err := conversation.Channel(c.ID, c.Entry, calc)
	if err != nil {
		t.Fatal(err)
	}
	const waiting = "while-down-1"
	if _, err := e.client.Emit(t.Context(), ch, conversation.ConversationMessage{ConversationID: c.ID, AgentID: c.Entry,
		Command: []string{"mul", "6", "7"}, Timestamp: time.Now().UTC(), CorrelationID: waiting},
		calf.WithKey(c.ID), calf.WithMetadata(calf.Metadata{CorrelationID: waiting})); err != nil {
		t.Fatal(err)
	}

	// Started again, the agent gets the pending command and answers it,
	// then the request sent meanwhile.
	agent = startNodeAgent(t, u, opts)
	again := agent.next(func(ev nodeEvent) bool { return ev.Event == "received" && ev.ID == req.ID })
	if again.CorrelationID != req.CorrelationID || !again.Redelivered || again.Deliveries < 2 {
		t.Fatalf("after the restart the agent received %+v, want %+v again", again, req)
	}
	for corr, want := range map[string]string{req.CorrelationID: "slept 1500 ms", waiting: "42"} {
		var m conversation.ConversationMessage
		testwait.For(t, 20*time.Second, fmt.Sprintf("the answer %q after the restart on the conversation channel", want), func() (ok bool) {
			m, ok = answered(corr)
			return ok
		})
		if m.Message != want || m.AgentID != calc || m.UserID != "" {
			t.Fatalf("the answer after the restart %+v, want %q", m, want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(answers) != 5 {
		t.Errorf("%d answers of the calculator, want 5: %+v", len(answers), answers)
	}
}
