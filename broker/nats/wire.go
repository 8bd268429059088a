package nats

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/broker/internal/delivery"
)

// ErrWire is matched by the errors of messages that do not decode from
// the wire: their payload is not a message envelope, or their subject is
// not one of this broker's.
var ErrWire = errors.New("nats: malformed wire message")

// Partition returns the partition of a message with the given key and id
// among n partitions: the FNV-1a 32-bit hash of the key (of the id when the
// key is empty) modulo n. Producers written in other languages compute the
// same to build the subject.
func Partition(key, id string, n int) int {
	if n <= 1 {
		return 0
	}
	s := key
	if s == "" {
		s = id
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(s))
	return int(h.Sum32() % uint32(n))
}

// subject returns the subject msg is published on.
func subject(prefix string, partition int, channel string) string {
	return prefix + "." + strconv.Itoa(partition) + "." + channel
}

// channelOf returns the channel a subject of prefix carries.
func channelOf(prefix, subj string) (string, error) {
	rest, ok := strings.CutPrefix(subj, prefix+".")
	if !ok {
		return "", fmt.Errorf("%w: subject %q lacks the prefix %q", ErrWire, subj, prefix)
	}
	p, ch, ok := strings.Cut(rest, ".")
	if !ok {
		return "", fmt.Errorf("%w: subject %q has no channel", ErrWire, subj)
	}
	if _, err := strconv.ParseUint(p, 10, 31); err != nil {
		return "", fmt.Errorf("%w: subject %q has no partition", ErrWire, subj)
	}
	if err := calf.ValidateChannel(ch); err != nil {
		return "", fmt.Errorf("%w: subject %q: %w", ErrWire, subj, err)
	}
	return ch, nil
}

// encode returns the payload of msg on the wire: the message as JSON, with
// the attempt left out. The data is compacted, and otherwise kept as it
// is.
func encode(msg *calf.Message) ([]byte, error) {
	data, err := delivery.Encode(msg)
	if err != nil {
		return nil, fmt.Errorf("nats: encode message %s: %w", msg.ID, err)
	}
	return data, nil
}

// decode returns the message a wire payload carries on subj. msgID is the
// Nats-Msg-Id header, used as the id when the envelope has none. The
// envelope's channel, when present, must be the subject's.
func decode(prefix, subj, msgID string, data []byte) (*calf.Message, error) {
	ch, err := channelOf(prefix, subj)
	if err != nil {
		return nil, err
	}
	var m calf.Message
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrWire, err)
	}
	if m.Channel != "" && m.Channel != ch {
		return nil, fmt.Errorf("%w: message on channel %q published on subject %q", ErrWire, m.Channel, subj)
	}
	m.Channel = ch
	if m.ID == "" {
		m.ID = msgID
	}
	m.Metadata.Attempt = 0
	return &m, nil
}

// rawMessage is what a payload that does not decode is parked as: its
// bytes as data, with what the subject and headers tell.
func rawMessage(prefix, subj, msgID string, data []byte) *calf.Message {
	ch, err := channelOf(prefix, subj)
	if err != nil {
		ch = subj
	}
	return &calf.Message{ID: msgID, Channel: ch, Data: data}
}
