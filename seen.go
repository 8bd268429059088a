package calf

// seenMessages remembers the messages a [Follower] has collected, by
// channel and id, so that a message the broker delivers again (the
// at-least-once delivery of a durable broker, whose acknowledgement of the
// first delivery was lost in a restart) is collected once. It keeps the
// most recent ones only: a redelivery comes within the broker's
// acknowledgement wait, seconds after the first, not thousands of
// messages later.
type seenMessages struct {
	small []seenKey // the first ones, scanned: most followers see a few
	cur   map[seenKey]struct{}
	prev  map[seenKey]struct{}
}

type seenKey struct{ channel, id string }

// seenSmall is how many keys are scanned before maps take over;
// seenGeneration how many a map holds before it is retired (two
// generations are kept).
const (
	seenSmall      = 16
	seenGeneration = 2048
)

// add records m and reports whether it is new. A message without an id is
// always new.
func (s *seenMessages) add(m *Message) bool {
	if m.ID == "" {
		return true
	}
	k := seenKey{m.Channel, m.ID}
	if s.cur == nil {
		for _, o := range s.small {
			if o == k {
				return false
			}
		}
		if len(s.small) < seenSmall {
			if s.small == nil {
				s.small = make([]seenKey, 0, 4)
			}
			s.small = append(s.small, k)
			return true
		}
		s.cur = make(map[seenKey]struct{}, 2*seenSmall)
		for _, o := range s.small {
			s.cur[o] = struct{}{}
		}
		s.small = nil
	}
	if _, ok := s.cur[k]; ok {
		return false
	}
	if _, ok := s.prev[k]; ok {
		return false
	}
	if len(s.cur) >= seenGeneration {
		s.prev, s.cur = s.cur, make(map[seenKey]struct{}, seenGeneration)
	}
	s.cur[k] = struct{}{}
	return true
}
