package delivery

import (
	"bytes"
	"encoding/json"

	"github.com/calf-go/calf"
)

// Encode returns the envelope of msg on a broker's wire: the message as
// JSON, with the attempt left out (each delivery counts its own). The data
// is compacted, and otherwise kept as it is: HTML characters are not
// escaped.
func Encode(msg *calf.Message) ([]byte, error) {
	m := *msg
	m.Metadata.Attempt = 0
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&m); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
