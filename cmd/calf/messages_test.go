package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// Each message points the way to go on the command line: flags, not Go
// fields; a store's URL, not a broker's; what is missing, in the user's
// words.
func TestMessagesPointTheRightWay(t *testing.T) {
	isolate(t)
	ctx := t.Context()
	srv, _ := newFakeServer(t)
	storeURL := "sqlite:" + filepath.Join(t.TempDir(), "calf.db")
	root := strings.TrimSuffix(srv.URL(), "/v1")
	// A run that exists but was not recorded.
	ran := runMain(ctx, "", "run", "--store", storeURL, "--model", srv.URL()+"#m", "--json", "hello")
	run := between(ran.stdout, `"run_id":"`, `"`)
	if ran.code != exitOK || run == "" {
		t.Fatalf("calf run = %+v", ran)
	}
	for _, tt := range []struct {
		name    string
		args    []string
		code    int
		want    []string
		notWant []string
	}{
		{
			name: "no worker serves the agent",
			args: []string{"run", "--broker", kafkaBrokerURL(t), "--store", storeURL, "hello"},
			code: exitFailure,
			want: []string{"no calf worker serves the agent assistant", "--wait", "calf worker --broker kafka://"},
			// The Go option is the library's word.
			notWant: []string{"RunOptions"},
		},
		{
			name: "a path as --store",
			args: []string{"runs", "list", "--store", "/tmp/calf.db"},
			code: exitUsage, want: []string{"--store /tmp/calf.db: no scheme: a SQLite file is sqlite:/tmp/calf.db"},
			notWant: []string{"nats://"},
		},
		{
			name: "trace of an unknown run",
			args: []string{"trace", "--store", storeURL, "nope"},
			code: exitFailure, want: []string{"calf: no such run: nope\n"},
		},
		{
			name: "trace of a run not recorded",
			args: []string{"trace", "--store", storeURL, run},
			code: exitFailure, want: []string{"run " + run + " was not recorded", "--record"},
		},
		{
			name: "runs show of an unknown run",
			args: []string{"runs", "show", "--store", storeURL, "nope"},
			code: exitFailure, want: []string{"calf: no such run: nope"},
			notWant: []string{"team/"},
		},
		{
			name: "a base URL without /v1",
			args: []string{"run", "--store", "memory:", "--model", root + "#m", "hello"},
			code: exitFailure, want: []string{"HTTP 404", "(is the base URL " + root + " missing /v1?)"},
		},
		{
			name: "a base URL without /v1, model discovered",
			args: []string{"run", "--store", "memory:", "--model", root, "hello"},
			code: exitFailure, want: []string{"404", "(is the base URL missing /v1?)"},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := runMain(ctx, "", tt.args...)
			if got.code != tt.code {
				t.Errorf("calf %s = %d, want %d; stderr %q", strings.Join(tt.args, " "), got.code, tt.code, got.stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(got.stderr, w) {
					t.Errorf("stderr %q does not say %q", got.stderr, w)
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(got.stderr, w) {
					t.Errorf("stderr %q says %q", got.stderr, w)
				}
			}
		})
	}
}
