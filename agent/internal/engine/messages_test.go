package engine

import (
	"testing"

	"github.com/calf-go/calf/model"
)

// A response's tool calls keep their ids unless one is empty, too long, or
// taken, by an earlier step's call or an earlier call of the response.
func TestUniqueCallIDs(t *testing.T) {
	long := string(make([]byte, 129))
	for _, tc := range []struct {
		name  string
		taken []string
		ids   []string
		want  []string
	}{
		{"kept", nil, []string{"a", "b"}, []string{"a", "b"}},
		{"empty", nil, []string{"", "b"}, []string{"call_3_0", "b"}},
		{"too long", nil, []string{long}, []string{"call_3_0"}},
		{"taken before", []string{"a"}, []string{"a"}, []string{"call_3_0"}},
		{"repeated", nil, []string{"0", "0"}, []string{"0", "call_3_1"}},
		{"number taken", []string{"call_3_0"}, []string{""}, []string{"call_3_0_1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := make([]model.ToolCall, len(tc.ids))
			for i, id := range tc.ids {
				calls[i].ID = id
			}
			UniqueCallIDs(3, calls, tc.taken, func(id string) string { return id })
			for i, c := range calls {
				if c.ID != tc.want[i] {
					t.Errorf("call %d: id %q, want %q", i, c.ID, tc.want[i])
				}
			}
		})
	}
}
