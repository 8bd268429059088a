package engine

import (
	"context"

	"github.com/calf-go/calf"
)

// FollowChain follows, on client, the events of a run and of the runs its
// handoffs lead to, on the channels of the agents the chain may reach
// (patterns, the run's own agent's first), and the dead letters of the
// chain and of the runs it starts: all on the chain's correlation id
// (the first run's id), with one follower.
func FollowChain(ctx context.Context, client *calf.Client, patterns []string, id string) (*calf.Follower, error) {
	f, err := client.Follow(ctx, patterns[0], id)
	if err != nil {
		return nil, err
	}
	// The dead letters of the chain, and of the runs it starts.
	if err := f.AddTree(calf.DeadLetterChannel); err != nil {
		f.Close()
		return nil, err
	}
	for _, p := range patterns[1:] {
		if err := f.Add(p); err != nil {
			f.Close()
			return nil, err
		}
	}
	return f, nil
}
