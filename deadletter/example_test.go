package deadletter_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/deadletter"
	storememory "github.com/calf-go/calf/store/memory"
)

// A worker records dead letters with Serve; an operator lists them and
// replays one once its cause is fixed.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b := memory.New(&memory.Options{Backoff: func(int) time.Duration { return time.Millisecond }})
	defer b.Close()
	client := calf.NewClient(b, nil)
	defer client.Close()
	s := storememory.New()
	if err := deadletter.Serve(ctx, client, s); err != nil {
		panic(err)
	}

	// A handler that fails twice, then succeeds.
	fails, done := 2, make(chan string)
	if err := client.Handle(ctx, "calf.example.work", func(_ context.Context, m *calf.Message) error {
		if fails > 0 {
			fails--
			return errors.New("database unreachable")
		}
		done <- m.ID
		return nil
	}, &calf.SubscribeOptions{Group: "workers", MaxAttempts: 2}); err != nil {
		panic(err)
	}
	if _, err := client.Emit(ctx, "calf.example.work", json.RawMessage(`{"job":1}`), calf.WithID("job-1")); err != nil {
		panic(err)
	}

	// Wait for the recorder to keep the dead letter.
	var recs []*deadletter.Record
	for wait := time.NewTicker(time.Millisecond); len(recs) == 0; {
		select {
		case <-wait.C:
		case <-ctx.Done():
			panic("no dead letter recorded")
		}
		recs, _ = deadletter.List(ctx, s)
	}
	r := recs[0]
	fmt.Println(r.ID, r.Attempts, r.Error)

	if _, _, err := deadletter.Replay(ctx, b, s, r.ID, time.Now()); err != nil {
		panic(err)
	}
	fmt.Println("handled", <-done)
	// Output:
	// deadletter.workers.job-1 2 database unreachable
	// handled job-1.replay
}
