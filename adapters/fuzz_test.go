package adapters_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/calf-go/calf/adapters"
)

// FuzzURLs checks that any URL is either accepted or refused without a
// panic, and that Redact never shows a password.
func FuzzURLs(f *testing.F) {
	for _, s := range []string{
		"memory://", "memory:", "nats://u:pw@h1:4222,h2", "nats+embedded:///tmp/x?partitions=2",
		"kafka://h:9092?partitions=3", "postgres://u:pw@h:5432/db?sslmode=disable", "redis://:pw@h:6379/0",
		"sqlite:", "sqlite:///a/b.db", "x", "", "://", "nats://[::1]:4222", "postgres://u:p%40ss@h/db",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		_ = adapters.CheckBrokerURL(raw)
		_ = adapters.CheckStoreURL(raw)
		_ = adapters.InProcess(raw)
		red := adapters.Redact(raw)
		if u, err := url.Parse(raw); err == nil {
			if pw, ok := u.User.Password(); ok && len(pw) >= 4 && !strings.Contains(strings.Replace(raw, pw, "", 1), pw) && strings.Contains(red, pw) {
				t.Errorf("Redact(%q) = %q shows the password %q", raw, red, pw)
			}
		}
	})
}
