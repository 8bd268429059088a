package nats

import (
	"context"
	"time"

	"github.com/calf-go/calf"
)

// interestTTL is how long the filters of the stream's consumers, read
// from the server, answer Subscribed before they are read again.
const interestTTL = 2 * time.Second

// interest is the filters of the stream's consumers, as last read.
type interest struct {
	filters []string
	at      time.Time
}

// Subscribed reports whether a message published on channel now would be
// kept for a consumer: the stream's retention is interest-based, so that
// a message that no consumer of the stream matches (no group of this
// stream and prefix subscribes to its channel, or none has yet) is
// dropped as soon as the server has acknowledged it. A publisher that can
// wait, a durable timer, holds its message until some consumer matches
// it: a timer kept in a store shared with processes on another stream or
// prefix is not fired into a stream where nobody reads it. The answer
// comes from the consumers' filters, read from the server at most every
// 2 seconds; when the server cannot be asked, it is true (the publish
// then fails on its own if the server is gone).
func (b *Broker) Subscribed(channel string) bool {
	if b.closed.Load() {
		return true
	}
	filters, ok := b.consumerFilters()
	if !ok {
		return true
	}
	for _, f := range filters {
		for p := range b.opts.Partitions {
			if calf.MatchChannel(f, subject(b.opts.Prefix, p, channel)) {
				return true
			}
		}
	}
	return false
}

// consumerFilters returns the filter subjects of the stream's consumers,
// read again when the last reading is older than interestTTL, and false
// when the server cannot be asked.
func (b *Broker) consumerFilters() ([]string, bool) {
	b.interestMu.Lock()
	defer b.interestMu.Unlock()
	if !b.interest.at.IsZero() && time.Since(b.interest.at) < interestTTL {
		return b.interest.filters, true
	}
	ctx, cancel := context.WithTimeout(context.Background(), b.opts.PublishTimeout)
	defer cancel()
	var filters []string
	infos := b.st.ListConsumers(ctx)
	for ci := range infos.Info() {
		if ci.Config.FilterSubject != "" {
			filters = append(filters, ci.Config.FilterSubject)
		}
		filters = append(filters, ci.Config.FilterSubjects...)
		if ci.Config.FilterSubject == "" && len(ci.Config.FilterSubjects) == 0 {
			filters = append(filters, b.opts.Prefix+".>") // the whole stream
		}
	}
	if err := infos.Err(); err != nil {
		b.log.Debug("nats: list the stream's consumers", "stream", b.opts.Stream, "err", err)
		return nil, false
	}
	b.interest = interest{filters: filters, at: time.Now()}
	return filters, true
}

// interestChanged has the next Subscribed read the consumers again: this
// broker has just created or joined some.
func (b *Broker) interestChanged() {
	b.interestMu.Lock()
	b.interest = interest{}
	b.interestMu.Unlock()
}
