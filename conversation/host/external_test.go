package host_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/conversation"
	"github.com/calf-go/calf/conversation/host"
	"github.com/calf-go/calf/internal/convid"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	storemem "github.com/calf-go/calf/store/memory"
)

// externalModel starts ext-agent and sends it a command, then tells the
// user its answer (or the send's error result).
func externalModel() modeltest.FunctionModel {
	return func(_ context.Context, req *model.Request) (*model.Response, error) {
		if _, ok := toolResult(req, "start"); !ok {
			return modeltest.ToolCalls(modeltest.Call("start", "start_conversation", `{"prototype":"ext-agent"}`)), nil
		}
		res, ok := toolResult(req, "send")
		if !ok {
			return modeltest.ToolCalls(modeltest.Call("send", "send", `{"agent":"ext-agent","command":["ping","1"]}`)), nil
		}
		return modeltest.Text("ext-agent says: " + res), nil
	}
}

// TestHostForwardsToExternal: a message for an external instance reaches
// its prototype's channel as an ExternalRequest, in the group of that
// channel; the answer sent on its reply channel with its correlation id
// comes back to the send.
func TestHostForwardsToExternal(t *testing.T) {
	e := newHost(t, memory.New(nil), storemem.New(), externalModel(), nil)
	c := e.create()
	ext := convid.InstanceID("ext-agent", c.ID)
	var mu sync.Mutex
	var got []host.ExternalRequest
	var envelopes []*calf.Message
	ch := host.ExternalChannel("ext-agent")
	if ch != "calf.conv.external.ext-agent" {
		t.Fatalf("ExternalChannel = %q", ch)
	}
	// An external process, as any language would write it.
	err := e.client.Handle(t.Context(), ch, func(ctx context.Context, msg *calf.Message) error {
		var req host.ExternalRequest
		if err := msg.Decode(&req); err != nil {
			return calf.Permanent(err)
		}
		mu.Lock()
		got = append(got, req)
		envelopes = append(envelopes, msg)
		mu.Unlock()
		answer := conversation.ConversationMessage{ConversationID: req.Message.ConversationID, AgentID: req.Instance,
			Message: "pong " + strings.Join(req.Message.Command[1:], " "), Timestamp: time.Now().UTC(),
			CorrelationID: req.Message.CorrelationID}
		_, err := e.client.Emit(ctx, req.ReplyChannel, answer, calf.WithID(msg.ID+".answer"),
			calf.WithKey(req.Message.ConversationID), calf.WithMetadata(calf.Metadata{CorrelationID: req.Message.CorrelationID}))
		return err
	}, &calf.SubscribeOptions{Group: ch})
	if err != nil {
		t.Fatal(err)
	}
	e.say(c, "ping it")
	if a := e.wait(c, 1)[0]; a.Message != "ext-agent says: pong 1" {
		t.Fatalf("answer %+v", a)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 {
		t.Fatalf("%d requests forwarded", len(got))
	}
	r, env := got[0], envelopes[0]
	if r.Instance != ext || r.From != c.Entry || r.Channel != "calf.conv."+c.ID+"."+c.Entry+"."+ext ||
		r.ReplyChannel != "calf.conv."+c.ID+"."+ext+"."+c.Entry || r.ID == "" ||
		r.Message.AgentID != c.Entry || r.Message.CorrelationID == "" {
		t.Errorf("request %+v", r)
	}
	if env.Key != c.ID || env.Metadata.CorrelationID != r.Message.CorrelationID || env.ID != host.ExternalRequestID(r.Channel, r.ID) {
		t.Errorf("envelope %+v", env)
	}
}

// TestHostRefusesForExternal: the host refuses a message for an external
// instance of a stopped conversation itself, and forwards nothing.
func TestHostRefusesForExternal(t *testing.T) {
	st := storemem.New()
	convs := conversation.NewConversations(st, nil)
	if err := convs.Prototypes().RegisterAll(t.Context(), []conversation.Prototype{
		{Name: "conversational-agent", Kind: conversation.KindExternal},
	}, false); err != nil {
		t.Fatal(err)
	}
	e := newHost(t, memory.New(nil), st, modeltest.NewTestModel(), nil)
	forwarded := make(chan *calf.Message, 1)
	ch := host.ExternalChannel("conversational-agent")
	if err := e.client.Handle(t.Context(), ch, func(_ context.Context, msg *calf.Message) error {
		forwarded <- msg
		return nil
	}, &calf.SubscribeOptions{Group: ch}); err != nil {
		t.Fatal(err)
	}
	c := e.create()
	if _, err := e.host.Stop(t.Context(), c.ID); err != nil {
		t.Fatal(err)
	}
	e.say(c, "hello?")
	if a := e.wait(c, 1)[0]; !strings.HasPrefix(a.Message, convid.ErrorPrefix) || !strings.Contains(a.Message, "stopped") {
		t.Fatalf("answer %+v", a)
	}
	select {
	case msg := <-forwarded:
		t.Fatalf("forwarded %s", msg.Data)
	default:
	}
}
