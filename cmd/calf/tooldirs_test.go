package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// calf serve refuses a tool directory that holds its SQLite store: the
// agent's commands would read every user's sessions in it.
func TestServeRefusesToolDirHoldingTheStore(t *testing.T) {
	isolate(t)
	data := os.Getenv("XDG_DATA_HOME") // the default store: data/calf/calf.db
	other := t.TempDir()
	for _, args := range [][]string{
		{"--bash", data},
		{"--bash", filepath.Join(data, "calf")},
		{"--read", data},
		{"--edit", data},
		{"--bash", other, "--store", "sqlite:" + filepath.Join(other, "db", "calf.db")},
		{"--bash", other, "--store", "sqlite://" + filepath.Join(other, "calf.db")},
	} {
		args := append([]string{"serve", "--addr", "127.0.0.1:0", "--mode", "bypass", "--model", "http://127.0.0.1:1/v1#m"}, args...)
		// Without the check, serve would run until the deadline.
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		got := runMain(ctx, "", args...)
		cancel()
		if got.code != exitUsage || !strings.Contains(got.stderr, "holds the store") {
			t.Errorf("calf %s: exit %d, %s", strings.Join(args, " "), got.code, got.stderr)
		}
	}
}

func TestCheckToolDirs(t *testing.T) {
	isolate(t)
	data := os.Getenv("XDG_DATA_HOME")
	dir := t.TempDir()
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Skipf("symbolic links: %v", err)
	}
	t.Chdir(dir)
	for _, tt := range []struct {
		store string
		f     agentFlags
		ok    bool
	}{
		{"sqlite:", agentFlags{bash: t.TempDir()}, true},
		{"sqlite:", agentFlags{bash: filepath.Join(data, "calf", "work")}, true},
		{"memory:", agentFlags{bash: data}, true},
		{"postgres://127.0.0.1/test", agentFlags{bash: data}, true},
		{"sqlite:", agentFlags{bash: data}, false},
		{"sqlite:calf.db", agentFlags{bash: "."}, false},
		{"sqlite:calf.db", agentFlags{read: link}, false},
		{"sqlite:" + filepath.Join(link, "new", "calf.db"), agentFlags{edit: dir}, false},
		{"sqlite:" + filepath.Join(dir, "calf.db"), agentFlags{bash: filepath.Join(dir, "sub")}, true},
	} {
		err := checkToolDirs(tt.store, &tt.f)
		if tt.ok != (err == nil) {
			t.Errorf("store %s, flags %+v: %v", tt.store, tt.f, err)
		}
	}
}
