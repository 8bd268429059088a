package sessionstore

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"
)

// A session's record written by an earlier version (agent's
// testdata/records) decodes, and encodes back to the same JSON: the
// record's fields kept their names, order and meaning.
func TestStoredRecordEncodesTheSame(t *testing.T) {
	data, err := os.ReadFile("../../testdata/records/session.json")
	if err != nil {
		t.Fatal(err)
	}
	var recs []struct {
		Kind string          `json:"kind"`
		ID   string          `json:"id"`
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(data, &recs); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, rec := range recs {
		if rec.Kind != "session" {
			continue
		}
		n++
		var stored bytes.Buffer
		if err := json.Compact(&stored, rec.Data); err != nil {
			t.Fatal(err)
		}
		r, err := Decode(rec.ID, stored.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		again, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(again, stored.Bytes()) {
			t.Errorf("session %s encodes otherwise:\n got %s\nwant %s", rec.ID, again, stored.Bytes())
		}
	}
	if n == 0 {
		t.Fatal("no session record in the fixtures")
	}
}
