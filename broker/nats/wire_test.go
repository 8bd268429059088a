package nats

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/calf-go/calf"
)

func TestWireRoundTrip(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	tests := []*calf.Message{
		{ID: "m1", Channel: "calf.agent.a.input", Key: "run-1", Data: json.RawMessage(`{"content":"hi"}`),
			Metadata: calf.Metadata{CorrelationID: "c", CausationID: "x", RunID: "run-1", SessionID: "s", Traceparent: "tp", Time: now}},
		{ID: "m2", Channel: "a", Metadata: calf.Metadata{Time: now}},
		{ID: "m3", Channel: "a.b", Data: json.RawMessage(`[1,2]`), Metadata: calf.Metadata{Attempt: 4}},
		{ID: "m4", Channel: "a.b", Data: json.RawMessage(`"<b>&amp;</b> \u00e9"`)},
	}
	for _, m := range tests {
		data, err := encode(m)
		if err != nil {
			t.Fatal(err)
		}
		subj := subject("pfx", Partition(m.Key, m.ID, 16), m.Channel)
		got, err := decode("pfx", subj, "", data)
		if err != nil {
			t.Fatalf("decode(%s): %v", data, err)
		}
		want := m.Clone()
		want.Metadata.Attempt = 0
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("round trip of %s (-want +got):\n%s", m.ID, diff)
		}
	}
}

func TestDecode(t *testing.T) {
	tests := []struct {
		name, subject, msgID, data string
		want                       *calf.Message // nil for an error
	}{
		{"channel from subject", "p.3.a.b", "", `{"id":"x","data":1}`, &calf.Message{ID: "x", Channel: "a.b", Data: json.RawMessage(`1`)}},
		{"id from header", "p.0.a", "hdr", `{"channel":"a"}`, &calf.Message{ID: "hdr", Channel: "a"}},
		{"attempt ignored", "p.0.a", "", `{"id":"x","metadata":{"attempt":7}}`, &calf.Message{ID: "x", Channel: "a"}},
		{"other channel", "p.0.a", "", `{"channel":"b"}`, nil},
		{"not json", "p.0.a", "", `nope`, nil},
		{"not an object", "p.0.a", "", `[1]`, nil},
		{"other prefix", "q.0.a", "", `{}`, nil},
		{"no partition", "p.x.a", "", `{}`, nil},
		{"no channel", "p.0", "", `{}`, nil},
		{"bad time", "p.0.a", "", `{"metadata":{"time":"yesterday"}}`, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decode("p", tc.subject, tc.msgID, []byte(tc.data))
			if tc.want == nil {
				if !errors.Is(err, ErrWire) {
					t.Errorf("decode = %+v, %v; want an error matching ErrWire", got, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("decode (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPartition(t *testing.T) {
	tests := []struct {
		key, id string
		n, want int
	}{
		{"a", "x", 16, 12}, // FNV-1a("a") = 0xe40c292c
		{"b", "x", 16, 5},  // FNV-1a("b") = 0xe70c2de5
		{"", "a", 16, 12},  // the id when there is no key
		{"a", "x", 1, 0},
		{"a", "x", 0, 0},
	}
	for _, tc := range tests {
		if got := Partition(tc.key, tc.id, tc.n); got != tc.want {
			t.Errorf("Partition(%q, %q, %d) = %d, want %d", tc.key, tc.id, tc.n, got, tc.want)
		}
	}
}

// TestConsumerName: the names documented for consumers in other
// languages.
func TestConsumerNameDocumented(t *testing.T) {
	tests := []struct {
		group string
		p     int
		want  string
	}{
		{"calf.conv.external.calc-agent", 0, "calf_conv_external_calc-agent_018bd1cfe721_p0"},
		{"calf.conv.external.calc-agent", 15, "calf_conv_external_calc-agent_018bd1cfe721_p15"},
	}
	for _, tc := range tests {
		if got := ConsumerName(tc.group, tc.p); got != tc.want {
			t.Errorf("ConsumerName(%q, %d) = %q, want %q", tc.group, tc.p, got, tc.want)
		}
	}
}

// FuzzDecode checks that no payload or subject makes the decoder panic,
// and that what it accepts is a message on a valid channel that encodes
// and decodes to itself.
func FuzzDecode(f *testing.F) {
	f.Add("p.1.a.b", "id", []byte(`{"id":"x","channel":"a.b","key":"k","data":{"n":1},"metadata":{"time":"2026-01-02T03:04:05Z"}}`))
	f.Add("p.0.a", "", []byte(`{"data":"\u00e9"}`))
	f.Add("p.0.a", "", []byte(`not json`))
	f.Add("p..a", "", []byte(`{}`))
	f.Add("p.99999999999.a", "", []byte(`null`))
	f.Fuzz(func(t *testing.T, subj, msgID string, data []byte) {
		m, err := decode("p", subj, msgID, data)
		if err != nil {
			if !errors.Is(err, ErrWire) {
				t.Fatalf("error %v does not match ErrWire", err)
			}
			raw := rawMessage("p", subj, msgID, data)
			_ = calf.NewDeadLetterMessage(raw, "g", calf.Permanent(err), 1, time.Now())
			return
		}
		if err := calf.ValidateChannel(m.Channel); err != nil {
			t.Fatalf("decoded channel %q: %v", m.Channel, err)
		}
		if !utf8.ValidString(subj) || !utf8.ValidString(msgID) {
			return // JSON cannot carry them unchanged
		}
		enc, err := encode(m)
		if err != nil {
			// Data that is not valid JSON cannot come out of a decode.
			t.Fatalf("encode of a decoded message: %v", err)
		}
		again, err := decode("p", subject("p", 0, m.Channel), "", enc)
		if err != nil {
			t.Fatalf("decode of a re-encoded message %s: %v", enc, err)
		}
		compact := cmp.Transformer("compact", func(r json.RawMessage) string {
			var b bytes.Buffer
			if err := json.Compact(&b, r); err != nil {
				return "invalid: " + string(r)
			}
			return b.String()
		})
		if diff := cmp.Diff(m, again, compact); diff != "" {
			t.Fatalf("re-encoded message differs (-first +second):\n%s", diff)
		}
	})
}

func BenchmarkEncodeDecode(b *testing.B) {
	m := &calf.Message{ID: "m1", Channel: "calf.agent.a.input", Key: "run-1", Data: json.RawMessage(`{"content":"hello"}`),
		Metadata: calf.Metadata{CorrelationID: "run-1", RunID: "run-1", Time: time.Now()}}
	subj := subject("calfbus", 3, m.Channel)
	b.ReportAllocs()
	for b.Loop() {
		data, err := encode(m)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := decode("calfbus", subj, "", data); err != nil {
			b.Fatal(err)
		}
	}
}
