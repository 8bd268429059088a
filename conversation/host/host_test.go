package host_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/brokertest"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/conversation"
	"github.com/calf-go/calf/conversation/docmem"
	"github.com/calf-go/calf/conversation/host"
	"github.com/calf-go/calf/internal/convid"
	"github.com/calf-go/calf/internal/testwait"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/store"
	storemem "github.com/calf-go/calf/store/memory"
)

// hostPrototypes is a conversational agent that may start a docmem agent
// and an external agent.
var hostPrototypes = []conversation.Prototype{
	{Name: "conversational-agent", Kind: conversation.KindLLM, Role: "Orchestrator", SystemPrompt: "You talk with the user.",
		Subagents: []string{"docmem-agent", "ext-agent"}, Permissions: &conversation.Permissions{Mode: "accept_reads"}},
	{Name: "docmem-agent", Kind: conversation.KindCode, Role: "Tool executor for docmem operations"},
	{Name: "ext-agent", Kind: conversation.KindExternal, Role: "An agent in another language"},
}

// hostEnv is a host on a broker, with the user's side of the
// conversations: their answers, by conversation.
type hostEnv struct {
	t      *testing.T
	st     store.Store
	client *calf.Client
	convs  *conversation.Conversations
	host   *host.Host

	mu      sync.Mutex
	answers map[string][]conversation.ConversationMessage
	ids     map[string]bool
}

// newHost serves a host of hostPrototypes on b with model m (for every
// LLM prototype; no model opener when m is nil) and the docmem agent.
func newHost(t *testing.T, b calf.Broker, st store.Store, m model.Model, opts *host.Options) *hostEnv {
	t.Helper()
	ctx := t.Context()
	client := calf.NewClient(b, nil)
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = client.Shutdown(sctx)
	})
	rt := agent.NewRuntime(client, st, nil)
	convs := conversation.NewConversations(st, nil)
	if err := convs.Prototypes().RegisterAll(ctx, hostPrototypes, false); err != nil && !errors.Is(err, conversation.ErrExists) {
		t.Fatal(err)
	}
	var o host.Options
	if opts != nil {
		o = *opts
	}
	if m != nil {
		o.Model = func(string) (model.Model, error) { return m, nil }
	}
	o.Code = map[string]host.CodeHandler{"docmem-agent": docmem.New(st, nil).CodeHandler()}
	h := host.New(rt, convs, &o)
	if err := h.Serve(ctx); err != nil {
		t.Fatal(err)
	}
	e := &hostEnv{t: t, st: st, client: client, convs: convs, host: h,
		answers: map[string][]conversation.ConversationMessage{}, ids: map[string]bool{}}
	// The user's side: every message to the user, once per id.
	err := client.Handle(ctx, "calf.conv.*.*.user", func(_ context.Context, msg *calf.Message) error {
		m, err := conversation.DecodeMessage(msg.Data)
		if err != nil {
			return calf.Permanent(err)
		}
		e.mu.Lock()
		defer e.mu.Unlock()
		if !e.ids[msg.ID] {
			e.ids[msg.ID] = true
			e.answers[m.ConversationID] = append(e.answers[m.ConversationID], m)
		}
		return nil
	}, &calf.SubscribeOptions{Group: "user-side"})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// create creates a conversation.
func (e *hostEnv) create() conversation.Conversation {
	e.t.Helper()
	c, err := e.convs.Create(e.t.Context(), conversation.NewConversation{UserID: "u1", Description: "User chat"})
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// say sends the user's message to the conversation's entry instance.
func (e *hostEnv) say(c conversation.Conversation, text string) {
	e.t.Helper()
	ch, err := conversation.Channel(c.ID, conversation.UserParticipant, c.Entry)
	if err != nil {
		e.t.Fatal(err)
	}
	m := conversation.ConversationMessage{ConversationID: c.ID, UserID: "u1", Message: text, Timestamp: time.Now().UTC()}
	if _, err := e.client.Emit(e.t.Context(), ch, m, calf.WithKey(c.ID)); err != nil {
		e.t.Fatal(err)
	}
}

// wait returns the user's first n answers in the conversation, failing
// after a while.
func (e *hostEnv) wait(c conversation.Conversation, n int) []conversation.ConversationMessage {
	e.t.Helper()
	var got []conversation.ConversationMessage
	testwait.ForErr(e.t, 20*time.Second, fmt.Sprintf("%d answers to the user", n), func() error {
		e.mu.Lock()
		got = slices.Clone(e.answers[c.ID])
		e.mu.Unlock()
		if len(got) < n {
			return fmt.Errorf("%d answers: %+v", len(got), got)
		}
		return nil
	})
	return got
}

// toolResult returns the text of the tool message answering call id in
// req, if any.
func toolResult(req *model.Request, id string) (string, bool) {
	for _, m := range req.Messages {
		if m.Role == model.RoleTool && m.ToolCallID == id {
			return m.Text(), true
		}
	}
	return "", false
}

// lastUser returns the text of the request's last user message.
func lastUser(req *model.Request) string {
	for _, m := range slices.Backward(req.Messages) {
		if m.Role == model.RoleUser {
			return m.Text()
		}
	}
	return ""
}

// docmemModel is the conversational agent of the seed: it starts the docmem
// agent, has it create the document, and tells the user.
func docmemModel() modeltest.FunctionModel {
	return func(_ context.Context, req *model.Request) (*model.Response, error) {
		started, ok := toolResult(req, "call_start")
		if !ok {
			return modeltest.ToolCalls(modeltest.Call("call_start", "start_conversation", `{"prototype":"docmem-agent"}`)), nil
		}
		var s struct{ Agent string }
		if err := json.Unmarshal([]byte(started), &s); err != nil || !strings.HasPrefix(s.Agent, "docmem-agent-") {
			return nil, fmt.Errorf("start_conversation answered %q", started)
		}
		created, ok := toolResult(req, "call_send")
		if !ok {
			args, _ := json.Marshal(map[string]any{"agent": s.Agent, "command": []string{"docmem-create", "project-notes"}})
			return modeltest.ToolCalls(modeltest.Call("call_send", "send", string(args))), nil
		}
		var res docmem.Result
		if err := json.Unmarshal([]byte(created), &res); err != nil || !res.OK || res.Doc != "project-notes" {
			return modeltest.Text("failed: " + created), nil
		}
		return modeltest.Text("I've created the docmem 'project-notes' for you."), nil
	}
}

// TestHostConversation: the seed's flow on the memory broker and each
// store: the user's message, start_conversation, a send to the docmem
// agent, which creates the document, and the answer on the user's
// channel.
func TestHostConversation(t *testing.T) {
	eachStore(t, func(t *testing.T, st store.Store) {
		e := newHost(t, memory.New(nil), st, docmemModel(), nil)
		c := e.create()
		e.say(c, "Create a docmem called project-notes")
		got := e.wait(c, 1)[0]
		if got.Message != "I've created the docmem 'project-notes' for you." || got.AgentID != c.Entry || got.UserID != "" {
			t.Fatalf("answer %+v", got)
		}
		res, err := docmem.New(st, nil).Apply(t.Context(), c.ID, docmem.Command{Command: docmem.CmdList})
		if err != nil || !slices.Equal(res.Docs, []string{"project-notes"}) {
			t.Fatalf("documents %+v, %v", res, err)
		}
		insts, err := e.convs.Instances(t.Context(), c.ID)
		if err != nil || len(insts) != 2 {
			t.Fatalf("instances %+v, %v", insts, err)
		}
	})
}

// TestHostDeliveredTwice: every message delivered twice (start_conversation
// and send among them) leaves one instance, one topic per pair and one
// document, and the user gets the answer.
func TestHostDeliveredTwice(t *testing.T) {
	st := storemem.New()
	e := newHost(t, brokertest.DuplicateDeliveries(memory.New(nil), 2), st, docmemModel(), nil)
	c := e.create()
	e.say(c, "Create a docmem called project-notes")
	if got := e.wait(c, 1)[0]; got.Message != "I've created the docmem 'project-notes' for you." {
		t.Fatalf("answer %+v", got)
	}
	ctx := t.Context()
	insts, err := e.convs.Instances(ctx, c.ID)
	if err != nil || len(insts) != 2 {
		t.Fatalf("instances %+v, %v", insts, err)
	}
	topics, err := e.convs.Topics(ctx, c.ID)
	if err != nil || len(topics) != 2 {
		t.Fatalf("topics %+v, %v", topics, err)
	}
	recs, err := st.List(ctx, docmem.KindDocument, c.ID+"/", "", 0)
	if err != nil || len(recs) != 1 {
		t.Fatalf("documents %d, %v", len(recs), err)
	}
}

// TestHostStartTwice: start_conversation called twice (in one step, then
// again) starts one instance with one topic.
func TestHostStartTwice(t *testing.T) {
	m := modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
		if _, ok := toolResult(req, "a"); !ok {
			return modeltest.ToolCalls(modeltest.Call("a", "start_conversation", `{"prototype":"docmem-agent"}`),
				modeltest.Call("b", "start_conversation", `{"prototype":"docmem-agent"}`)), nil
		}
		if _, ok := toolResult(req, "c"); !ok {
			return modeltest.ToolCalls(modeltest.Call("c", "start_conversation", `{"prototype":"docmem-agent"}`)), nil
		}
		a, _ := toolResult(req, "a")
		b, _ := toolResult(req, "b")
		cc, _ := toolResult(req, "c")
		return modeltest.Text(a + " " + b + " " + cc), nil
	})
	e := newHost(t, memory.New(nil), storemem.New(), m, nil)
	c := e.create()
	e.say(c, "start it")
	got := e.wait(c, 1)[0].Message
	want := `{"agent":"` + convid.InstanceID("docmem-agent", c.ID) + `"}`
	if got != want+" "+want+" "+want {
		t.Fatalf("answer %q", got)
	}
	insts, _ := e.convs.Instances(t.Context(), c.ID)
	topics, _ := e.convs.Topics(t.Context(), c.ID)
	if len(insts) != 2 || len(topics) != 2 {
		t.Fatalf("%d instances, %d topics", len(insts), len(topics))
	}
}

// deleter is a memory broker that records the channels it is asked to
// delete.
type deleter struct {
	*memory.Broker
	mu      sync.Mutex
	deleted []string
}

func (d *deleter) DeleteChannels(_ context.Context, chs ...string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.deleted = append(d.deleted, chs...)
	return nil
}

// TestHostStoppedRefuses: a message to a stopped conversation is answered
// by an error message; Stop deletes the channels of its topics on a
// broker that can.
func TestHostStoppedRefuses(t *testing.T) {
	called := false
	m := modeltest.FunctionModel(func(context.Context, *model.Request) (*model.Response, error) {
		called = true
		return modeltest.Text("hello"), nil
	})
	b := &deleter{Broker: memory.New(nil)}
	e := newHost(t, b, storemem.New(), m, &host.Options{DeleteChannels: true})
	c := e.create()
	if _, err := e.host.Stop(t.Context(), c.ID); err != nil {
		t.Fatal(err)
	}
	b.mu.Lock()
	want := []string{"calf.conv." + c.ID + ".user." + c.Entry, "calf.conv." + c.ID + "." + c.Entry + ".user"}
	if !slices.Equal(b.deleted, want) {
		t.Errorf("deleted %q, want %q", b.deleted, want)
	}
	b.mu.Unlock()
	e.say(c, "hello?")
	got := e.wait(c, 1)[0]
	if !strings.HasPrefix(got.Message, convid.ErrorPrefix) || !strings.Contains(got.Message, "stopped") || got.AgentID != c.Entry {
		t.Fatalf("answer %+v", got)
	}
	if called {
		t.Error("the model was called for a stopped conversation")
	}
}

// TestHostSendTimeout: a send to an external agent that never answers
// ends in an error result for the model, and the run still answers the
// user.
func TestHostSendTimeout(t *testing.T) {
	var mu sync.Mutex
	var sendResult string
	m := modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
		if _, ok := toolResult(req, "start"); !ok {
			return modeltest.ToolCalls(modeltest.Call("start", "start_conversation", `{"prototype":"ext-agent"}`)), nil
		}
		res, ok := toolResult(req, "send")
		if !ok {
			return modeltest.ToolCalls(modeltest.Call("send", "send", `{"agent":"ext-agent","command":["ping"]}`)), nil
		}
		mu.Lock()
		sendResult = res
		mu.Unlock()
		return modeltest.Text("The external agent did not answer."), nil
	})
	e := newHost(t, memory.New(nil), storemem.New(), m, &host.Options{SendTimeout: 300 * time.Millisecond})
	c := e.create()
	// The external agent's channel gets the request; nobody answers.
	ext := convid.InstanceID("ext-agent", c.ID)
	requests := make(chan conversation.ConversationMessage, 4)
	if err := e.client.Handle(t.Context(), "calf.conv."+c.ID+"."+c.Entry+"."+ext, func(_ context.Context, msg *calf.Message) error {
		m, err := conversation.DecodeMessage(msg.Data)
		if err == nil {
			requests <- m
		}
		return err
	}, &calf.SubscribeOptions{Group: "ext-agent"}); err != nil {
		t.Fatal(err)
	}
	e.say(c, "ping the external agent")
	if got := e.wait(c, 1)[0]; got.Message != "The external agent did not answer." {
		t.Fatalf("answer %+v", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(sendResult, "did not answer within 300ms") {
		t.Errorf("the send's result %q", sendResult)
	}
	select {
	case r := <-requests:
		if !slices.Equal(r.Command, []string{"ping"}) || r.CorrelationID == "" || r.AgentID != c.Entry {
			t.Errorf("the request %+v", r)
		}
	default:
		t.Error("the external agent got no request")
	}
}

// TestHostOrder: two messages in a row to an LLM instance are answered in
// order, the second run seeing the first exchange.
func TestHostOrder(t *testing.T) {
	var mu sync.Mutex
	var seen [][]string
	m := modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
		var texts []string
		for _, m := range req.Messages {
			if m.Role != model.RoleSystem {
				texts = append(texts, m.Text())
			}
		}
		mu.Lock()
		seen = append(seen, texts)
		mu.Unlock()
		time.Sleep(20 * time.Millisecond)
		return modeltest.Text("answer to " + lastUser(req)), nil
	})
	e := newHost(t, memory.New(nil), storemem.New(), m, nil)
	c := e.create()
	e.say(c, "first")
	e.say(c, "second")
	got := e.wait(c, 2)
	if got[0].Message != "answer to first" || got[1].Message != "answer to second" {
		t.Fatalf("answers %+v", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 || !slices.Equal(seen[1], []string{"first", "answer to first", "second"}) {
		t.Fatalf("the model saw %q", seen)
	}
}

// TestHostRunBlock: a model without tool calling writes a "# Run" block;
// the host carries it out and gives the results to the next round, whose
// answer goes to the user.
func TestHostRunBlock(t *testing.T) {
	var mu sync.Mutex
	var results string
	m := modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
		last := lastUser(req)
		if !strings.HasPrefix(last, "Results of your # Run block") {
			return modeltest.Text("I'll make it.\n\n# Run\nstart-conversation docmem-agent\nsend docmem-agent docmem-create project-notes\n"), nil
		}
		mu.Lock()
		results = last
		mu.Unlock()
		return modeltest.Text("Done: project-notes exists."), nil
	})
	st := storemem.New()
	e := newHost(t, memory.New(nil), st, m, nil)
	c := e.create()
	e.say(c, "Create a docmem called project-notes")
	if got := e.wait(c, 1)[0]; got.Message != "Done: project-notes exists." {
		t.Fatalf("answer %+v", got)
	}
	mu.Lock()
	defer mu.Unlock()
	dm := convid.InstanceID("docmem-agent", c.ID)
	if !strings.Contains(results, "start-conversation docmem-agent: "+dm) || !strings.Contains(results, `"ok":true`) {
		t.Errorf("results %q", results)
	}
	res, err := docmem.New(st, nil).Apply(t.Context(), c.ID, docmem.Command{Command: docmem.CmdList})
	if err != nil || !slices.Equal(res.Docs, []string{"project-notes"}) {
		t.Fatalf("documents %+v, %v", res, err)
	}
}

// TestHostNoTopicParks: a message between participants without a topic is
// parked, not answered.
func TestHostNoTopicParks(t *testing.T) {
	e := newHost(t, memory.New(nil), storemem.New(), modeltest.NewTestModel(), nil)
	c := e.create()
	parked := make(chan *calf.Message, 1)
	if err := e.client.Handle(t.Context(), calf.DeadLetterChannel, func(_ context.Context, msg *calf.Message) error {
		parked <- msg
		return nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	dm := convid.InstanceID("docmem-agent", c.ID)
	ch, _ := conversation.Channel(c.ID, conversation.UserParticipant, dm)
	m := conversation.ConversationMessage{ConversationID: c.ID, UserID: "u1", Command: []string{"docmem-list"}, Timestamp: time.Now()}
	if _, err := e.client.Emit(t.Context(), ch, m, calf.WithKey(c.ID)); err != nil {
		t.Fatal(err)
	}
	select {
	case msg := <-parked:
		var dl calf.DeadLetter
		if err := msg.Decode(&dl); err != nil || !strings.Contains(dl.Error, "no topic") {
			t.Fatalf("dead letter %+v, %v", dl, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("not parked")
	}
	if _, err := e.convs.Route(t.Context(), c.ID, conversation.UserParticipant, dm); !errors.Is(err, conversation.ErrNoTopic) {
		t.Fatal(err)
	}
}

// TestHostLLMSubagent: a send to an LLM subagent starts a run of its agent
// in its own session; its answer comes back to the sender's send.
func TestHostLLMSubagent(t *testing.T) {
	m := modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
		if strings.Contains(req.Messages[0].Text(), "You summarize.") {
			return modeltest.Text("summary of " + lastUser(req)), nil
		}
		if _, ok := toolResult(req, "start"); !ok {
			return modeltest.ToolCalls(modeltest.Call("start", "start_conversation", `{"prototype":"summarizer"}`)), nil
		}
		res, ok := toolResult(req, "send")
		if !ok {
			return modeltest.ToolCalls(modeltest.Call("send", "send", `{"agent":"summarizer","message":"cats purr"}`)), nil
		}
		return modeltest.Text("The summarizer says: " + res), nil
	})
	st := storemem.New()
	convs := conversation.NewConversations(st, nil)
	if err := convs.Prototypes().RegisterAll(t.Context(), []conversation.Prototype{
		{Name: "conversational-agent", SystemPrompt: "You talk.", Subagents: []string{"summarizer"}},
		{Name: "summarizer", SystemPrompt: "You summarize."},
	}, false); err != nil {
		t.Fatal(err)
	}
	e := newHost(t, memory.New(nil), st, m, nil)
	c := e.create()
	e.say(c, "summarize: cats purr")
	if got := e.wait(c, 1)[0]; got.Message != "The summarizer says: summary of cats purr" {
		t.Fatalf("answer %+v", got)
	}
}

// TestHostStopCancels: stopping a conversation cancels the run in
// progress, whose sender is told, and refuses the message queued behind
// it.
func TestHostStopCancels(t *testing.T) {
	called := make(chan struct{}, 4)
	release := make(chan struct{})
	defer close(release)
	m := modeltest.FunctionModel(func(ctx context.Context, req *model.Request) (*model.Response, error) {
		called <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return modeltest.Text("too late"), nil
	})
	e := newHost(t, memory.New(nil), storemem.New(), m, nil)
	c := e.create()
	e.say(c, "first")
	e.say(c, "second")
	select {
	case <-called:
	case <-time.After(10 * time.Second):
		t.Fatal("the model was not called")
	}
	if _, err := e.host.Stop(t.Context(), c.ID); err != nil {
		t.Fatal(err)
	}
	got := e.wait(c, 2)
	// The second message is refused when the run ends, or at once when it
	// arrives after the stop: either may come first.
	if i := slices.IndexFunc(got, func(m conversation.ConversationMessage) bool {
		return strings.Contains(m.Message, "ended cancelled")
	}); i < 0 || !strings.HasSuffix(got[1-i].Message, "is stopped") {
		t.Fatalf("answers %+v", got)
	}
	for _, a := range got {
		if !strings.HasPrefix(a.Message, convid.ErrorPrefix) {
			t.Errorf("answer %q is no error", a.Message)
		}
	}
	if len(called) != 0 {
		t.Error("the queued message was run")
	}
}

// TestHostRunBlockNeedsSubagents: the "# Run" heading in the answer of a
// prototype without subagents is text like any other.
func TestHostRunBlockNeedsSubagents(t *testing.T) {
	const answer = "To test it:\n\n# Run\nnpm test"
	st := storemem.New()
	convs := conversation.NewConversations(st, nil)
	if err := convs.Prototypes().Register(t.Context(), conversation.Prototype{Name: "conversational-agent"}, false); err != nil {
		t.Fatal(err)
	}
	e := newHost(t, memory.New(nil), st, modeltest.NewTestModel(modeltest.Text(answer)), nil)
	c := e.create()
	e.say(c, "how do I test it?")
	if got := e.wait(c, 1)[0]; got.Message != answer {
		t.Fatalf("answer %+v", got)
	}
}
