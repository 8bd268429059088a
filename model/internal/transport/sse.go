package transport

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// maxEventLine bounds one line of a stream of server-sent events.
const maxEventLine = 16 << 20

// Event is one server-sent event.
type Event struct {
	// Event is the event's type ("message" when the stream names none).
	Event string
	// Data is the event's data, its data lines joined by newlines.
	Data string
	// ID is the last event id the stream set.
	ID string
	// Retry is the reconnection time the stream asked for, in
	// milliseconds; zero when it did not.
	Retry int
}

// SSEReader reads server-sent events (the WHATWG event-stream format):
// fields event, data (over several lines), id and retry; comment lines
// (keep-alives) are skipped, and so are events without data.
type SSEReader struct {
	r    *bufio.Reader
	id   string
	done bool
}

// NewSSEReader returns a reader of the events of r.
func NewSSEReader(r io.Reader) *SSEReader {
	return &SSEReader{r: bufio.NewReaderSize(r, 4<<10)}
}

// ErrLineTooLong is returned for a line of an event stream over 16 MiB.
var ErrLineTooLong = errors.New("transport: event stream line too long")

// Next returns the next event; io.EOF once the stream has ended (an event
// cut short by the end of the stream is dropped, as the format says).
func (s *SSEReader) Next() (Event, error) {
	if s.done {
		return Event{}, io.EOF
	}
	var (
		ev      Event
		data    strings.Builder
		hasData bool
	)
	for {
		line, err := s.line()
		if err != nil {
			s.done = true
			if errors.Is(err, io.EOF) {
				return Event{}, io.EOF
			}
			return Event{}, err
		}
		if line == "" {
			if !hasData {
				ev = Event{}
				continue
			}
			ev.Data, ev.ID = data.String(), s.id
			if ev.Event == "" {
				ev.Event = "message"
			}
			return ev, nil
		}
		if line[0] == ':' {
			continue // a comment: a keep-alive
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			ev.Event = value
		case "data":
			if hasData {
				data.WriteByte('\n')
			}
			data.WriteString(value)
			hasData = true
		case "id":
			if !strings.ContainsRune(value, 0) {
				s.id = value
			}
		case "retry":
			if n, err := strconv.Atoi(value); err == nil {
				ev.Retry = n
			}
		}
	}
}

// line returns the next line without its end (LF or CRLF).
func (s *SSEReader) line() (string, error) {
	var buf []byte
	for {
		chunk, err := s.r.ReadSlice('\n')
		buf = append(buf, chunk...)
		if len(buf) > maxEventLine {
			return "", fmt.Errorf("%w (over %d bytes)", ErrLineTooLong, maxEventLine)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil {
			if len(buf) > 0 && errors.Is(err, io.EOF) {
				// The last line has no end: the event it belongs to is
				// cut short.
				return "", io.EOF
			}
			return "", err
		}
		buf = bytes.TrimSuffix(buf, []byte("\n"))
		buf = bytes.TrimSuffix(buf, []byte("\r"))
		return string(buf), nil
	}
}
