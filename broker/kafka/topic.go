package kafka

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/calf-go/calf"
)

// MaxTopicLength is the longest topic name Kafka accepts.
const MaxTopicLength = 249

// Topic returns the Kafka topic that carries the messages of channel, for
// a broker whose [Options.TopicPrefix] is prefix: prefix, then channel
// with every byte of its tokens outside [a-zA-Z0-9_-] replaced by '_'. The
// dots between tokens stay. Channels that differ only in such bytes share
// a topic; consumers tell them apart by the channel in the envelope. It
// fails with an error matching [calf.ErrInvalidChannel] for an invalid
// channel, or one whose topic would be longer than [MaxTopicLength].
func Topic(prefix, channel string) (string, error) {
	if err := calf.ValidateChannel(channel); err != nil {
		return "", err
	}
	t := prefix + mapName(channel)
	if len(t) > MaxTopicLength {
		return "", fmt.Errorf("%w: %q: its Kafka topic would have %d characters, over Kafka's limit of %d", calf.ErrInvalidChannel, channel, len(t), MaxTopicLength)
	}
	return t, nil
}

// mapName replaces the bytes of s that a topic name may not hold, except
// the dots, by '_'.
func mapName(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '.' || topicByte(c) {
			b.WriteByte(c)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// topicByte reports whether c may appear in a topic token.
func topicByte(c byte) bool {
	return c == '_' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// topicMatcher describes the topics a subscription pattern consumes: the
// single topic of a pattern without wildcards, or a regular expression
// over topic names.
type topicMatcher struct {
	topic string         // the topic of a pattern without wildcards
	re    *regexp.Regexp // otherwise, the topics that may carry matching channels
}

// matcher returns the topics of pattern, for a broker with the given
// topic prefix. The regular expression is anchored at both ends: "*"
// matches one topic token and ">" one or more.
func matcher(prefix, pattern string) (topicMatcher, error) {
	if err := calf.ValidatePattern(pattern); err != nil {
		return topicMatcher{}, err
	}
	if !strings.ContainsAny(pattern, "*>") {
		t, err := Topic(prefix, pattern)
		return topicMatcher{topic: t}, err
	}
	var b strings.Builder
	b.WriteString("^")
	b.WriteString(regexp.QuoteMeta(prefix))
	for i, tok := range strings.Split(pattern, ".") {
		if i > 0 {
			b.WriteString(`\.`)
		}
		switch tok {
		case "*":
			b.WriteString(`[^.]+`)
		case ">":
			b.WriteString(`[^.]+(\.[^.]+)*`)
		default:
			b.WriteString(regexp.QuoteMeta(mapName(tok)))
		}
	}
	b.WriteString("$")
	return topicMatcher{re: regexp.MustCompile(b.String())}, nil
}

// match reports whether topic may carry messages of the pattern.
func (m topicMatcher) match(topic string) bool {
	if m.re == nil {
		return topic == m.topic
	}
	return m.re.MatchString(topic)
}

// expr returns what the consumer consumes: the topic, or the regular
// expression.
func (m topicMatcher) expr() string {
	if m.re == nil {
		return m.topic
	}
	return m.re.String()
}
