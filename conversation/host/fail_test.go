package host_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/conversation"
	"github.com/calf-go/calf/internal/convid"
	"github.com/calf-go/calf/internal/testwait"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	storemem "github.com/calf-go/calf/store/memory"
)

// TestHostFailedRunFailsInstance: a run that fails marks its instance
// failed with the reason; the message queued behind it and the messages
// sent later are refused with it, without a model call; Host.Restart puts
// the instance back to work, and the next message is answered.
func TestHostFailedRunFailsInstance(t *testing.T) {
	release := make(chan struct{})
	var calls atomic.Int32
	m := modeltest.FunctionModel(func(ctx context.Context, req *model.Request) (*model.Response, error) {
		calls.Add(1)
		switch text := lastUser(req); text {
		case "break":
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return nil, errors.New("the model exploded")
		default:
			return modeltest.Text("hi: " + text), nil
		}
	})
	st := storemem.New()
	e := newHost(t, memory.New(nil), st, m, nil)
	ctx := t.Context()
	c := e.create()
	e.say(c, "break")
	testwait.For(t, 20*time.Second, "the failing run's model call", func() bool { return calls.Load() == 1 })
	e.say(c, "queued")
	testwait.For(t, 20*time.Second, "the second message queued", func() bool { _, queued := inboxOf(t, st, c); return queued == 1 })
	close(release)

	got := e.wait(c, 2)
	if !strings.HasPrefix(got[0].Message, convid.ErrorPrefix) || !strings.Contains(got[0].Message, "the model exploded") {
		t.Errorf("answer to the failing message: %q", got[0].Message)
	}
	if want := c.Entry + " is error: "; !strings.HasPrefix(got[1].Message, convid.ErrorPrefix+want) || !strings.Contains(got[1].Message, "the model exploded") {
		t.Errorf("answer to the queued message: %q, want %q and the reason", got[1].Message, want)
	}
	in, err := e.convs.Instance(ctx, c.ID, c.Entry)
	if err != nil || in.Status != conversation.StatusError || !strings.Contains(in.Error, "the model exploded") || in.Stopped.IsZero() {
		t.Fatalf("the instance after its run failed: %+v, %v", in, err)
	}

	e.say(c, "hello?")
	if got := e.wait(c, 3)[2]; !strings.HasPrefix(got.Message, convid.ErrorPrefix+c.Entry+" is error: ") {
		t.Errorf("answer to a message for the failed instance: %q", got.Message)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("%d model calls, want 1: a failed instance runs nothing", n)
	}

	in, err = e.host.Restart(ctx, c.ID, c.Entry)
	if err != nil || in.Status != conversation.StatusRunning || in.Error != "" || !in.Stopped.IsZero() {
		t.Fatalf("Restart = %+v, %v", in, err)
	}
	e.say(c, "again")
	if got := e.wait(c, 4)[3]; got.Message != "hi: again" {
		t.Errorf("answer after the restart: %q", got.Message)
	}
}

// TestHostCannotServeFailsInstance: an instance whose prototype no code
// serves is marked failed with the reason, and refused until restarted.
func TestHostCannotServeFailsInstance(t *testing.T) {
	st := storemem.New()
	convs := conversation.NewConversations(st, nil)
	if err := convs.Prototypes().Register(t.Context(), conversation.Prototype{Name: "conversational-agent", Kind: conversation.KindCode}, false); err != nil {
		t.Fatal(err)
	}
	e := newHost(t, memory.New(nil), st, modeltest.NewTestModel(), nil)
	c := e.create()
	e.say(c, "hello")
	if got := e.wait(c, 1)[0]; !strings.Contains(got.Message, "no code serves the prototype conversational-agent") {
		t.Errorf("answer %q", got.Message)
	}
	testwait.For(t, 20*time.Second, "the instance failed", func() bool {
		in, err := e.convs.Instance(t.Context(), c.ID, c.Entry)
		return err == nil && in.Status == conversation.StatusError && strings.Contains(in.Error, "no code serves")
	})
}

// TestHostWithoutModelFailsInstance: a host given no model opener links
// no provider and serves no LLM prototype; the sender is told why.
func TestHostWithoutModelFailsInstance(t *testing.T) {
	st := storemem.New()
	e := newHost(t, memory.New(nil), st, nil, nil)
	c := e.create()
	e.say(c, "hello")
	if got := e.wait(c, 1)[0]; !got.IsError() || !strings.Contains(got.Message, "opens no model (host.Options.Model)") {
		t.Errorf("answer %q", got.Message)
	}
	testwait.For(t, 20*time.Second, "the instance failed", func() bool {
		in, err := e.convs.Instance(t.Context(), c.ID, c.Entry)
		return err == nil && in.Status == conversation.StatusError && strings.Contains(in.Error, "opens no model")
	})
}
