package kafka

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// startDirect starts a private subscription: a client that consumes the
// partitions of the pattern's existing topics from their end offsets, so
// that it gets the messages published after Subscribe returns, without
// joining a group; the topics created later are found by discover and
// consumed from their start.
func (s *subscription) startDirect(ctx context.Context) error {
	initial, err := s.existing(ctx)
	if err != nil {
		return err
	}
	copts := s.clientOptions()
	if len(initial) > 0 {
		copts = append(copts, kgo.ConsumePartitions(initial))
	}
	// The workers exist before the first fetch.
	s.mu.Lock()
	for topic, ps := range initial {
		for p := range ps {
			s.addWorker(partition{topic, p})
		}
	}
	s.mu.Unlock()
	cl, err := kgo.NewClient(append(copts, s.b.opts.ClientOptions...)...)
	if err != nil {
		s.stopAll()
		return fmt.Errorf("kafka: subscription to %s: client: %w", s.pattern, err)
	}
	s.cl = cl
	go s.poll()
	if s.topics.re != nil {
		s.discovering.Go(s.discoverLoop)
	}
	return nil
}

// existing returns the end offsets of the partitions of the existing
// topics of the pattern.
func (s *subscription) existing(ctx context.Context) (map[string]map[int32]kgo.Offset, error) {
	topics, err := s.matchingTopics(ctx)
	if err != nil || len(topics) == 0 {
		return nil, err
	}
	ends, err := s.b.adm.ListEndOffsets(ctx, topics...)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("kafka: subscription to %s: list end offsets: %w", s.pattern, err)
	}
	offsets := map[string]map[int32]kgo.Offset{}
	for topic, ps := range ends {
		offsets[topic] = map[int32]kgo.Offset{}
		for p, o := range ps {
			offsets[topic][p] = kgo.NewOffset().At(o.Offset)
		}
	}
	return offsets, nil
}

// matchingTopics lists the existing topics of the pattern.
func (s *subscription) matchingTopics(ctx context.Context) ([]string, error) {
	if s.topics.re == nil {
		return []string{s.topics.topic}, nil
	}
	all, err := s.b.adm.ListTopics(ctx)
	if err != nil {
		return nil, fmt.Errorf("kafka: list topics: %w", err)
	}
	var topics []string
	for _, t := range all.Names() {
		if s.topics.match(t) {
			topics = append(topics, t)
		}
	}
	return topics, nil
}

// addWorker starts the worker of tp; s.mu is held.
func (s *subscription) addWorker(tp partition) {
	s.known[tp] = true
	w := newWorker(s, tp)
	s.workers[tp] = w
	go w.run()
}

// created tells a private subscription that this broker created topic,
// which matches its pattern.
func (s *subscription) created(topic string) {
	s.mu.Lock()
	s.pendingTopics[topic] = true
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// discoverLoop looks for new topics of the pattern every MetadataMaxAge,
// and at once when this broker creates one, until the subscription ends.
// A topic just created may not be listed at once: until it is, it looks
// again a few times, sooner than MetadataMaxAge.
func (s *subscription) discoverLoop() {
	t := time.NewTicker(s.b.opts.MetadataMaxAge)
	defer t.Stop()
	var (
		retry <-chan time.Time
		delay time.Duration
	)
	for {
		select {
		case <-t.C:
		case <-s.wake:
			delay = 5 * time.Millisecond
		case <-retry:
		case <-s.ctx.Done():
			return
		}
		retry = nil
		if err := s.discover(); err != nil && s.ctx.Err() == nil {
			s.b.log.Debug("kafka: discover topics", "pattern", s.pattern, "error", err)
		}
		s.mu.Lock()
		pending := len(s.pendingTopics) > 0
		s.mu.Unlock()
		if pending && delay < 2*time.Second {
			retry = time.After(delay)
			delay *= 2
		}
	}
}

// discover starts consuming, from their start, the partitions of the
// pattern's topics not consumed yet.
func (s *subscription) discover() error {
	ctx, cancel := context.WithTimeout(s.ctx, s.b.opts.RebalanceTimeout)
	defer cancel()
	all, err := s.b.adm.ListTopics(ctx)
	if err != nil {
		return err
	}
	add := map[string]map[int32]kgo.Offset{}
	n := 0
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return nil
	}
	for _, d := range all.Sorted() {
		if !s.topics.match(d.Topic) || d.Err != nil || len(d.Partitions) == 0 {
			continue
		}
		delete(s.pendingTopics, d.Topic)
		for p := range d.Partitions {
			tp := partition{d.Topic, p}
			if s.known[tp] {
				continue
			}
			s.addWorker(tp)
			if add[d.Topic] == nil {
				add[d.Topic] = map[int32]kgo.Offset{}
			}
			add[d.Topic][p] = kgo.NewOffset().AtStart()
			n++
		}
	}
	s.mu.Unlock()
	if n > 0 {
		s.cl.AddConsumePartitions(add)
	}
	return nil
}
