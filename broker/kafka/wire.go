package kafka

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/broker/internal/delivery"
)

// ErrWire is matched by the errors of records that do not decode from the
// wire: their value is not a message envelope, or its channel does not
// belong on the record's topic.
var ErrWire = errors.New("kafka: malformed wire message")

// recordKey returns the Kafka record key of msg: its key, or its id when
// the key is empty. Kafka's default partitioner (murmur2 of the key, as
// every Kafka client computes it) places the record.
func recordKey(msg *calf.Message) []byte {
	if msg.Key != "" {
		return []byte(msg.Key)
	}
	return []byte(msg.ID)
}

// encode returns the value of msg's record: the message as JSON, with the
// attempt left out. The data is compacted, and otherwise kept as it is.
func encode(msg *calf.Message) ([]byte, error) {
	data, err := delivery.Encode(msg)
	if err != nil {
		return nil, fmt.Errorf("kafka: encode message %s: %w", msg.ID, err)
	}
	return data, nil
}

// decode returns the message a record's value carries on topic. When the
// envelope has no channel, the topic without the prefix is the channel;
// when it has no key, the record key is the key (its bytes that are not
// UTF-8 replaced by U+FFFD, as the message's JSON would replace them: the
// key stays the same when the message is published again). The envelope
// must have an id, and its channel must map to the topic.
func decode(prefix, topic string, key, value []byte) (*calf.Message, error) {
	var m calf.Message
	if err := json.Unmarshal(value, &m); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrWire, err)
	}
	if m.ID == "" {
		// Consumers know a message again by its id: two records without
		// one would be taken for one message.
		return nil, fmt.Errorf("%w: a record on topic %q carries a message without an id", ErrWire, topic)
	}
	if m.Channel == "" {
		m.Channel = strings.TrimPrefix(topic, prefix)
	}
	t, err := Topic(prefix, m.Channel)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrWire, err)
	}
	if t != topic {
		return nil, fmt.Errorf("%w: message on channel %q published on topic %q", ErrWire, m.Channel, topic)
	}
	if k := strings.ToValidUTF8(string(key), "\uFFFD"); m.Key == "" && k != m.ID {
		m.Key = k
	}
	m.Metadata.Attempt = 0
	return &m, nil
}
