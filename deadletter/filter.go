package deadletter

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/store"
)

// Filter selects recorded dead letters. Its zero value selects every one
// not yet replayed.
type Filter struct {
	// Agent keeps the dead letters of the messages of the agent, team or
	// workflow of this name: those on its channels (calf.agent.{name}.*,
	// calf.team.{name}.*, calf.workflow.{name}.*) or parked by its groups.
	Agent string
	// Channel keeps the dead letters of messages whose channel matches
	// this pattern (calf.MatchChannel: "*" one token, ">" the rest).
	Channel string
	// Since and Until keep the dead letters parked at or after Since and
	// before Until; a zero time does not bound.
	Since, Until time.Time
	// Error keeps the dead letters whose error contains this text.
	Error string
	// Replayed keeps those already replayed too.
	Replayed bool
}

// Match reports whether f selects r.
func (f *Filter) Match(r *Record) bool {
	if r.Replayed() && !f.Replayed {
		return false
	}
	channel := ""
	if r.Message != nil {
		channel = r.Message.Channel
	}
	if f.Channel != "" && !calf.MatchChannel(f.Channel, channel) {
		return false
	}
	if f.Agent != "" && !ownedBy(f.Agent, channel, r.Group) {
		return false
	}
	if !f.Since.IsZero() && r.Time.Before(f.Since) {
		return false
	}
	if !f.Until.IsZero() && !r.Time.Before(f.Until) {
		return false
	}
	return f.Error == "" || strings.Contains(r.Error, f.Error)
}

// ownedBy reports whether a message on channel, parked by group, is one of
// the agent's, team's or workflow's named name.
func ownedBy(name, channel, group string) bool {
	for _, kind := range []string{"calf.agent.", "calf.team.", "calf.workflow."} {
		p := kind + name + "."
		if strings.HasPrefix(channel, p) || strings.HasPrefix(group, p) || group == kind+name {
			return true
		}
	}
	return false
}

// Select returns the recorded dead letters that f selects, ordered by id.
func Select(ctx context.Context, s store.Store, f Filter) ([]*Record, error) {
	all, err := List(ctx, s)
	if err != nil {
		return nil, err
	}
	var out []*Record
	for _, r := range all {
		if f.Match(r) {
			out = append(out, r)
		}
	}
	return out, nil
}

// Outcome is what [ReplayMany] did with one dead letter.
type Outcome struct {
	// Record is the dead letter, as marked after the replay.
	Record *Record
	// Published reports that this call published it; false for one
	// replayed before.
	Published bool
	// Err is why it could not be replayed.
	Err error
}

// ReplayMany replays the dead letters ids, one after the other, and
// reports each one's outcome; an unknown id is an outcome matching
// [ErrNotFound], and the others go on. Like [Replay] it is idempotent: a
// dead letter replayed already is not published again. It stops early
// only when ctx ends.
func ReplayMany(ctx context.Context, b calf.Broker, s store.Store, ids []string, now time.Time) []Outcome {
	out := make([]Outcome, 0, len(ids))
	for _, id := range ids {
		if ctx.Err() != nil {
			out = append(out, Outcome{Record: &Record{ID: id}, Err: fmt.Errorf("deadletter: replay %s: %w", id, ctx.Err())})
			continue
		}
		r, published, err := Replay(ctx, b, s, id, now)
		if r == nil {
			r = &Record{ID: id}
		}
		out = append(out, Outcome{Record: r, Published: published, Err: err})
	}
	return out
}
