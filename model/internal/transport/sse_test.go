package transport

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func readAll(t *testing.T, s string) ([]Event, error) {
	t.Helper()
	r := NewSSEReader(strings.NewReader(s))
	var evs []Event
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			return evs, nil
		}
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
	}
}

func TestSSEReader(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want []Event
	}{
		{"named events", "event: message_start\ndata: {\"a\":1}\n\nevent: ping\ndata: {}\n\n",
			[]Event{{Event: "message_start", Data: `{"a":1}`}, {Event: "ping", Data: "{}"}}},
		{"unnamed events are messages", "data: one\n\ndata: two\n\n",
			[]Event{{Event: "message", Data: "one"}, {Event: "message", Data: "two"}}},
		{"data over several lines", "data: a\ndata: b\ndata:c\n\n", []Event{{Event: "message", Data: "a\nb\nc"}}},
		{"comments and keep-alives", ": ping\n\n:\ndata: x\n\n", []Event{{Event: "message", Data: "x"}}},
		{"CRLF", "event: e\r\ndata: x\r\n\r\n", []Event{{Event: "e", Data: "x"}}},
		{"ids carry over", "id: 7\ndata: a\n\ndata: b\n\n", []Event{{Event: "message", Data: "a", ID: "7"}, {Event: "message", Data: "b", ID: "7"}}},
		{"retry", "retry: 3000\ndata: a\n\n", []Event{{Event: "message", Data: "a", Retry: 3000}}},
		{"an event without data is skipped", "event: nothing\n\ndata: a\n\n", []Event{{Event: "message", Data: "a"}}},
		{"trailing spaces kept", "data: {\"x\":1}  \n\n", []Event{{Event: "message", Data: `{"x":1}  `}}},
		{"an event cut short is dropped", "data: a\n\ndata: b", []Event{{Event: "message", Data: "a"}}},
		{"done marker", "data: {}\n\ndata: [DONE]\n\n", []Event{{Event: "message", Data: "{}"}, {Event: "message", Data: "[DONE]"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readAll(t, tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSSEReaderLongLines(t *testing.T) {
	long := strings.Repeat("x", 100<<10) // longer than the reader's buffer
	got, err := readAll(t, "data: "+long+"\n\n")
	if err != nil || len(got) != 1 || got[0].Data != long {
		t.Fatalf("a 100 KiB line: %d events, %v", len(got), err)
	}
	_, err = readAll(t, "data: "+strings.Repeat("x", maxEventLine+1)+"\n\n")
	if !errors.Is(err, ErrLineTooLong) {
		t.Errorf("a line over the limit: %v; want ErrLineTooLong", err)
	}
}
