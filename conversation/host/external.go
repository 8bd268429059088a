package host

import (
	"context"
	"fmt"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/conversation"
)

// ExternalChannelPrefix starts the channel of each external prototype:
// ExternalChannelPrefix + the prototype's name (see [ExternalChannel]).
// It has four tokens, so that [ChannelPattern] does not match it.
const ExternalChannelPrefix = "calf.conv.external."

// ExternalChannel returns the channel on which a host forwards the
// messages for the instances of the external prototype prototype, as
// [ExternalRequest]s keyed by conversation: calf.conv.external.{prototype}.
// The processes that serve the prototype consume it in the consumer group
// of the same name, which the host prepares ([calf.PrepareGroup]), so that
// the messages sent while no process runs wait for the first one; their
// answers go on the conversation channel [ExternalRequest.ReplyChannel].
func ExternalChannel(prototype string) string { return ExternalChannelPrefix + prototype }

// ExternalRequest is what a host forwards on [ExternalChannel] for each
// message addressed to an instance of an external prototype, once it has
// checked that the conversation runs, that the instance runs and that the
// two participants have a topic (a message that fails a check is refused
// by the host, as for any instance, and not forwarded):
//
//	{"id": "…", "channel": "calf.conv.{c}.{from}.{instance}",
//	 "reply_channel": "calf.conv.{c}.{instance}.{from}",
//	 "instance": "calc-agent-{c}", "from": "conversational-agent-{c}",
//	 "message": {ConversationMessage}}
//
// Its envelope has the id [ExternalRequestID] of the message's channel
// and id, the conversation id as key, and the message's correlation id
// as metadata.correlation_id. docs/conversations.md tells how a process in
// another language serves it.
type ExternalRequest struct {
	// ID is the message's id on its conversation channel: the same when
	// it is delivered again.
	ID string `json:"id"`
	// Channel is the conversation channel the message was sent on.
	Channel string `json:"channel"`
	// ReplyChannel is where the answer goes: the channel from Instance to
	// From.
	ReplyChannel string `json:"reply_channel"`
	// Instance is the instance the message is for.
	Instance string `json:"instance"`
	// From is the sender: [.UserParticipant] or an instance id.
	From string `json:"from"`
	// Message is the message, as it was sent.
	Message conversation.ConversationMessage `json:"message"`
}

// ExternalRequestID returns the id of the [ExternalRequest] a host
// forwards for the message of id msgID on channel: the same when the
// message is handled again, so that a broker's duplicate window drops the
// second copy.
func ExternalRequestID(channel, msgID string) string { return derive("external", channel, msgID) }

// forward sends a message for the external instance to, from from, on its
// prototype's channel, after preparing the channel's group.
func (h *Host) forward(ctx context.Context, prototype, to, from string, msg *calf.Message, m *conversation.ConversationMessage) error {
	ch := ExternalChannel(prototype)
	if err := h.prepareExternal(ctx, prototype); err != nil {
		return err
	}
	reply, err := conversation.Channel(m.ConversationID, to, from)
	if err != nil {
		return calf.Permanent(err)
	}
	req := ExternalRequest{ID: msg.ID, Channel: msg.Channel, ReplyChannel: reply, Instance: to, From: from, Message: *m}
	_, err = h.rt.Client().Emit(ctx, ch, req, calf.WithID(ExternalRequestID(msg.Channel, msg.ID)),
		calf.WithKey(m.ConversationID), calf.WithMetadata(calf.Metadata{CorrelationID: m.CorrelationID}))
	return err
}

// prepareExternal prepares the consumer group of the external prototype's
// channel, once per host: from then on the broker keeps its messages for
// the group's members, those not yet started included.
func (h *Host) prepareExternal(ctx context.Context, prototype string) error {
	h.mu.Lock()
	done := h.prepared[prototype]
	h.mu.Unlock()
	if done {
		return nil
	}
	ch := ExternalChannel(prototype)
	if err := calf.PrepareGroup(ctx, h.rt.Client().Broker(), ch, ch); err != nil {
		return fmt.Errorf("conversation: prepare the group of %s: %w", ch, err)
	}
	h.mu.Lock()
	h.prepared[prototype] = true
	h.mu.Unlock()
	return nil
}
