package delivery

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/calf-go/calf"
)

func TestEncode(t *testing.T) {
	msg := &calf.Message{ID: "m1", Channel: "c.x", Key: "k", Data: json.RawMessage(`{"html": "<b>&</b>"}`)}
	msg.Metadata.Attempt = 3
	data, err := Encode(msg)
	if err != nil {
		t.Fatal(err)
	}
	if msg.Metadata.Attempt != 3 {
		t.Error("Encode changed the caller's message")
	}
	if !strings.Contains(string(data), `{"html":"<b>&</b>"}`) {
		t.Errorf("the data was escaped or not compacted: %s", data)
	}
	if strings.HasSuffix(string(data), "\n") {
		t.Error("the envelope ends with a newline")
	}
	var back calf.Message
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if back.ID != "m1" || back.Channel != "c.x" || back.Key != "k" || back.Metadata.Attempt != 0 {
		t.Errorf("decoded %+v; want the message with the attempt left out", back)
	}
}
