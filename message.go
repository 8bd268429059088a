package calf

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"time"
)

// Message is one event on a broker.
//
// Data holds the JSON payload. Brokers share the Data slice between the
// subscribers of one message, so handlers must not modify it.
type Message struct {
	// ID identifies the message. Calf's handlers derive ids
	// deterministically, so that a re-emitted event has the id of the
	// original and consumers can recognise the duplicate.
	ID string `json:"id"`
	// Channel is the channel the message was published on.
	Channel string `json:"channel"`
	// Key is the ordering key: messages with the same key are delivered in
	// publish order within a consumer group. Calf uses the run id.
	Key string `json:"key,omitempty"`
	// Data is the JSON payload.
	Data json.RawMessage `json:"data,omitempty"`
	// Metadata carries correlation and tracing information.
	Metadata Metadata `json:"metadata"`
}

// Metadata is the envelope information of a [Message].
type Metadata struct {
	// CorrelationID ties together every message of one request; for an agent
	// run it is the run id.
	CorrelationID string `json:"correlation_id,omitempty"`
	// CausationID is the id of the message whose handling emitted this one.
	CausationID string `json:"causation_id,omitempty"`
	// RunID is the id of the agent run the message belongs to.
	RunID string `json:"run_id,omitempty"`
	// SessionID is the conversation the run continues, if any.
	SessionID string `json:"session_id,omitempty"`
	// Traceparent is a W3C trace context header value.
	Traceparent string `json:"traceparent,omitempty"`
	// Attempt is the delivery attempt, starting at 1. Brokers set it on
	// delivery; publishers leave it zero.
	Attempt int `json:"attempt,omitempty"`
	// Time is when the message was first published.
	Time time.Time `json:"time"`
	// Producer names the process that published the message (the
	// [Options.Name] of its client), so that a run's events tell which
	// worker handled what; empty when the client has no name.
	Producer string `json:"producer,omitempty"`
}

// Clone returns a copy of m that shares Data.
func (m *Message) Clone() *Message {
	c := *m
	return &c
}

// Decode unmarshals the message's data into v.
func (m *Message) Decode(v any) error {
	if err := json.Unmarshal(m.Data, v); err != nil {
		return &DecodeError{Channel: m.Channel, ID: m.ID, Err: err}
	}
	return nil
}

// NewID returns a random 128-bit identifier in hexadecimal.
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

type messageKey struct{}

// ContextWithMessage returns a context that carries msg as the message being
// handled. [Client.Emit] uses it to propagate correlation metadata.
func ContextWithMessage(ctx context.Context, msg *Message) context.Context {
	return context.WithValue(ctx, messageKey{}, msg)
}

// MessageFromContext returns the message being handled, if any.
func MessageFromContext(ctx context.Context) (*Message, bool) {
	m, ok := ctx.Value(messageKey{}).(*Message)
	return m, ok && m != nil
}
