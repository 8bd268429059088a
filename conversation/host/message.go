package host

import (
	"context"
	"errors"
	"fmt"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/conversation"
	"github.com/calf-go/calf/internal/convid"
)

// onMessage handles a message on a conversation channel,
// calf.conv.{conversation}.{from}.{to}: it goes to instance to.
func (h *Host) onMessage(ctx context.Context, msg *calf.Message) error {
	conv, from, to, ok := splitChannel(msg.Channel)
	if !ok {
		return calf.Permanent(fmt.Errorf("conversation: %s is no conversation channel", msg.Channel))
	}
	if to == conversation.UserParticipant {
		return nil // the user's side reads it
	}
	m, err := conversation.DecodeMessage(msg.Data)
	if err != nil {
		return calf.Permanent(fmt.Errorf("conversation: message %s on %s: %w", msg.ID, msg.Channel, err))
	}
	if m.ConversationID != conv {
		return calf.Permanent(fmt.Errorf("conversation: message %s on %s is of conversation %s", msg.ID, msg.Channel, m.ConversationID))
	}
	if (from == conversation.UserParticipant) != (m.UserID != "") || (from != conversation.UserParticipant && m.AgentID != from) {
		return calf.Permanent(fmt.Errorf("conversation: message %s on %s: its sender is not %s", msg.ID, msg.Channel, from))
	}
	t, err := h.convs.Topic(ctx, conv, from, to)
	if err != nil {
		if errors.Is(err, conversation.ErrNotFound) {
			return calf.Permanent(fmt.Errorf("%w: %s and %s in conversation %s (message %s)", conversation.ErrNoTopic, from, to, conv, msg.ID))
		}
		return err
	}
	if from != conversation.UserParticipant && t.Participants[0] == to {
		// The answer of an instance that to started: for the request
		// waiting for it.
		return h.relay(ctx, msg, &m)
	}
	refuse := func(format string, args ...any) error {
		return h.reply(ctx, conv, to, from, convid.ErrorPrefix+fmt.Sprintf(format, args...), m.CorrelationID, derive("refuse", msg.Channel, msg.ID))
	}
	inst, err := h.convs.Instance(ctx, conv, to)
	if errors.Is(err, conversation.ErrNotFound) {
		return refuse("no instance %s in conversation %s", to, conv)
	}
	if err != nil {
		return err
	}
	p, err := h.convs.Prototypes().Get(ctx, inst.Prototype)
	if errors.Is(err, conversation.ErrNotFound) {
		return h.failAndRefuse(ctx, inst, fmt.Sprintf("the prototype %s of %s is not registered", inst.Prototype, to), refuse)
	}
	if err != nil {
		return err
	}
	c, err := h.convs.Get(ctx, conv)
	if err != nil {
		return err
	}
	if c.Status != conversation.StatusRunning {
		return refuse("conversation %s is stopped", conv)
	}
	if inst.Status != conversation.StatusRunning {
		if inst.Error != "" {
			return refuse("%s is %s: %s", to, inst.Status, inst.Error)
		}
		return refuse("%s is %s", to, inst.Status)
	}
	switch kindOf(&p) {
	case conversation.KindExternal:
		return h.forward(ctx, p.Name, to, from, msg, &m)
	case conversation.KindCode:
		handler := h.o.Code[p.Name]
		if handler == nil {
			return h.failAndRefuse(ctx, inst, fmt.Sprintf("no code serves the prototype %s", p.Name), refuse)
		}
		text, err := handler(ctx, CodeRequest{Instance: inst, From: from, ID: msg.ID, Message: m})
		if err != nil {
			return err
		}
		return h.reply(ctx, conv, to, from, text, m.CorrelationID, derive("answer", msg.Channel, msg.ID))
	default:
		return h.enqueue(ctx, p, inst, from, msg, &m, refuse)
	}
}

// failAndRefuse marks the instance failed for reason, an instance this
// host cannot serve, and refuses the message with the reason.
func (h *Host) failAndRefuse(ctx context.Context, inst conversation.Instance, reason string, refuse func(string, ...any) error) error {
	if err := h.convs.Fail(ctx, inst.Conversation, inst.ID, reason); err != nil {
		return err
	}
	return refuse("%s", reason)
}

// reply sends text from instance from to participant to, with the
// correlation id corr, as the message id.
func (h *Host) reply(ctx context.Context, conv, from, to, text, corr, id string) error {
	ch, err := conversation.Channel(conv, from, to)
	if err != nil {
		return calf.Permanent(err)
	}
	c := h.rt.Client()
	m := conversation.ConversationMessage{ConversationID: conv, AgentID: from, Message: text, Timestamp: c.Now().UTC(), CorrelationID: corr}
	md := calf.Metadata{}
	if corr != "" {
		md.CorrelationID = corr
	}
	_, err = c.Emit(ctx, ch, m, calf.WithID(id), calf.WithKey(conv), calf.WithMetadata(md))
	return err
}

// relay republishes an instance's answer to the instance that started it
// on replyChannel, where the request that waits for it reads it.
func (h *Host) relay(ctx context.Context, msg *calf.Message, m *conversation.ConversationMessage) error {
	if m.CorrelationID == "" {
		h.rt.Client().Logger().Warn("conversation: a message to the instance that started its sender answers no request: dropped",
			"channel", msg.Channel, "id", msg.ID)
		return nil
	}
	_, err := h.rt.Client().Emit(ctx, replyChannel, msg.Data, calf.WithID(derive("relay", msg.Channel, msg.ID)),
		calf.WithKey(m.ConversationID), calf.WithMetadata(calf.Metadata{CorrelationID: m.CorrelationID}))
	return err
}
