package redis

import (
	"testing"

	"github.com/alicebob/miniredis/v2"
	goredis "github.com/redis/go-redis/v9"
)

// TestPutScriptReplay runs the write script the way a client resends it
// after losing the reply: the same request again is reported as already
// applied, while another writer's request with the same version is a
// conflict.
func TestPutScriptReplay(t *testing.T) {
	m := miniredis.RunT(t)
	client := goredis.NewClient(&goredis.Options{Addr: m.Addr()})
	t.Cleanup(func() { client.Close() })
	s := New(client, nil)
	keys := []string{s.recordKey("k", "i"), s.indexKey("k")}
	run := func(expected, next, data, token string) int64 {
		t.Helper()
		n, err := putScript.Run(t.Context(), client, keys, "i", expected, next, data, "1", token).Int64()
		if err != nil {
			t.Fatalf("put script: %v", err)
		}
		return n
	}
	steps := []struct {
		name                        string
		expected, next, data, token string
		want                        int64
		wantData                    string
	}{
		{"create", "0", "1", "one", "a", 1, "one"},
		{"create resent", "0", "1", "one", "a", 2, "one"},
		{"create by another", "0", "1", "other", "b", 0, "one"},
		{"update", "1", "2", "two", "c", 1, "two"},
		{"update resent", "1", "2", "two", "c", 2, "two"},
		{"update by another", "1", "2", "other", "d", 0, "two"},
		{"stale resend", "0", "1", "one", "a", 0, "two"},
	}
	for _, st := range steps {
		if got := run(st.expected, st.next, st.data, st.token); got != st.want {
			t.Errorf("%s: script returned %d, want %d", st.name, got, st.want)
		}
		if got := m.HGet(keys[0], "d"); got != st.wantData {
			t.Errorf("%s: stored data %q, want %q", st.name, got, st.wantData)
		}
	}
}
