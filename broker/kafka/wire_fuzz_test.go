package kafka

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/calf-go/calf"
)

// FuzzDecode feeds arbitrary records to the decoder of the consumers. A
// record either fails with ErrWire, or decodes to a message on a valid
// channel of the record's topic, with no attempt, that encodes and decodes
// back to itself.
func FuzzDecode(f *testing.F) {
	full := &calf.Message{
		ID: "r1.3.tool_call.c1", Channel: "calf.agent.calc.tool_call", Key: "r1", Data: []byte(`{"step":3,"args":"{\"a\":2}"}`),
		Metadata: calf.Metadata{
			CorrelationID: "r1", CausationID: "r1.2", RunID: "r1", SessionID: "s", Attempt: 4,
			Traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
			Time:        time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC), Producer: "host/1",
		},
	}
	value, err := encode(full)
	if err != nil {
		f.Fatal(err)
	}
	seeds := []struct {
		topic, key string
		value      []byte
	}{
		{"calf.calf.agent.calc.tool_call", "r1", value},
		{"calf.calf.agent.calc.tool_call", "r1.3.tool_call.c1", []byte(`{"id":"r1.3.tool_call.c1","data":{}}`)},
		{"calf.orders.eu_west.created", "", []byte(`{"id":"m","channel":"orders.eu west.created","data":"é"}`)},
		{"calf.x", "k", []byte(`{"id":"m","channel":"y","metadata":{}}`)},
		{"calf.x", "k", []byte(`{"id":"m","channel":"x..y"}`)},
		{"calf.x", "k", []byte(`{"id":"m","data":{"a":`)},
		{"calf.x", "k", []byte(`null`)},
		{"calf.x", "k", []byte{}},
		{"calf.", "", []byte(`{}`)},
		{"calf.0", "\xe0", []byte(`{"id":"m"}`)},
	}
	for _, s := range seeds {
		f.Add(s.topic, []byte(s.key), s.value)
	}
	const prefix = "calf."
	f.Fuzz(func(t *testing.T, topic string, key, value []byte) {
		m, err := decode(prefix, topic, key, value)
		if err != nil {
			if !errors.Is(err, ErrWire) {
				t.Fatalf("decode failed with %v, which does not match ErrWire", err)
			}
			return
		}
		if err := calf.ValidateChannel(m.Channel); err != nil {
			t.Fatalf("decoded a message on an invalid channel: %v", err)
		}
		if got, err := Topic(prefix, m.Channel); err != nil || got != topic {
			t.Fatalf("decoded channel %q maps to topic %q (%v), the record's was %q", m.Channel, got, err, topic)
		}
		if m.Metadata.Attempt != 0 {
			t.Fatalf("decoded attempt %d, want 0", m.Metadata.Attempt)
		}
		again, err := encode(m)
		if err != nil {
			t.Fatalf("a decoded message does not encode: %v", err)
		}
		back, err := decode(prefix, topic, recordKey(m), again)
		if err != nil {
			t.Fatalf("a decoded message, encoded again, does not decode: %v\n%s", err, again)
		}
		if diff := cmp.Diff(m, back); diff != "" {
			t.Fatalf("decode(encode(m)) differs from m (-m +back):\n%s", diff)
		}
	})
}

// TestDecodeNeedsIDKeepsKey checks what the fuzzer found: a record whose envelope
// has no id is refused (consumers would take two such records for one
// message), and a record key that is not UTF-8 becomes the key the
// message keeps when it is published again.
func TestDecodeNeedsIDKeepsKey(t *testing.T) {
	for _, value := range []string{`null`, `{}`, `{"channel":"x","data":1}`} {
		if _, err := decode("calf.", "calf.x", []byte("k"), []byte(value)); !errors.Is(err, ErrWire) {
			t.Errorf("decode of %s = %v, want ErrWire", value, err)
		}
	}
	m, err := decode("calf.", "calf.x", []byte("a\xe0b"), []byte(`{"id":"m"}`))
	if err != nil {
		t.Fatal(err)
	}
	if m.Key != "a\uFFFDb" {
		t.Errorf("key %q, want %q", m.Key, "a\uFFFDb")
	}
}
