package deadletter_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/deadletter"
	"github.com/calf-go/calf/store"
	storemem "github.com/calf-go/calf/store/memory"
)

// Replayed dead letters older than the cutoff go, with their index
// entries; those never replayed stay, whatever their age.
func TestSweep(t *testing.T) {
	ctx := context.Background()
	s := storemem.New()
	put := func(id string, replayed time.Time) {
		r := deadletter.Record{ID: id, DeadLetter: calf.DeadLetter{
			Message: &calf.Message{ID: id, Channel: "calf.agent.a.input", Metadata: calf.Metadata{CorrelationID: "run-" + id}},
			Time:    time.Now().Add(-48 * time.Hour),
		}, ReplayedAt: replayed}
		data, _ := json.Marshal(r)
		if _, err := s.Put(ctx, store.KindDeadLetter, id, data, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Put(ctx, store.KindDeadLetterRun, "run-"+id+"/"+id, []byte(`{}`), 0); err != nil {
			t.Fatal(err)
		}
	}
	put("old-replayed", time.Now().Add(-24*time.Hour))
	put("never-replayed", time.Time{})
	put("new-replayed", time.Now())
	runs, records, err := deadletter.Sweep(ctx, s, time.Now().Add(-time.Hour))
	if err != nil || runs != 1 || records != 2 {
		t.Fatalf("sweep: %d dead letters, %d records, %v; want 1 and 2", runs, records, err)
	}
	for id, want := range map[string]bool{"old-replayed": false, "never-replayed": true, "new-replayed": true} {
		_, err := s.Get(ctx, store.KindDeadLetter, id)
		_, ierr := s.Get(ctx, store.KindDeadLetterRun, "run-"+id+"/"+id)
		if (err == nil) != want || (ierr == nil) != want {
			t.Errorf("%s: kept %t (index %t), want %t", id, err == nil, ierr == nil, want)
		}
	}
}
