package deadletter_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/deadletter"
	storememory "github.com/calf-go/calf/store/memory"
)

// FuzzHandler feeds the recorder arbitrary payloads: each is recorded,
// and the record reads back.
func FuzzHandler(f *testing.F) {
	orig := &calf.Message{ID: "m1", Channel: "calf.test.work", Key: "k", Data: json.RawMessage(`{"n":1}`)}
	f.Add([]byte(calf.NewDeadLetterMessage(orig, "g", errors.New("boom"), 3, time.Unix(0, 0)).Data))
	f.Add([]byte(`{"message":null}`))
	f.Add([]byte(`{"message":{"id":"x","channel":"","data":"x"},"raw_data":"AAEC"}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(``))
	f.Fuzz(func(t *testing.T, data []byte) {
		s := storememory.New()
		msg := &calf.Message{ID: "deadletter.g.m1", Channel: calf.DeadLetterChannel, Data: data}
		if err := deadletter.Handler(s)(t.Context(), msg); err != nil {
			t.Fatalf("Handler: %v", err)
		}
		r, err := deadletter.Get(t.Context(), s, msg.ID)
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		if r.ID != msg.ID || r.Message == nil {
			t.Errorf("record = %+v", r)
		}
		if _, err := deadletter.ReplayMessage(r); err == nil && r.Message.Channel == "" {
			t.Errorf("ReplayMessage accepted a record without a channel: %+v", r)
		}
	})
}
