package main

import (
	"bytes"
	"context"
	"errors"
	"go/build"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
)

// buildCalf builds the calf command into dir, with version set at link
// time, and returns the binary's path.
func buildCalf(t *testing.T, dir, version string) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(build.Default.GOROOT, "bin", "go")
	}
	bin := filepath.Join(dir, "calf")
	if runtime.GOOS == "windows" {
		bin += ".exe"
	}
	args := []string{"build", "-o", bin, "-ldflags", "-X main.version=" + version}
	if raceEnabled {
		// Built like the test, the binary reuses the compiled packages.
		args = append(args, "-race")
	}
	cmd := exec.Command(goTool, append(args, ".")...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// calfEnv returns the environment without the variables calf reads, with
// the default store in dir, plus extra.
func calfEnv(dir string, extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case envAPIKey, envBaseURL, envModel, envChatLog, "XDG_DATA_HOME", "GORACE":
			continue
		}
		env = append(env, kv)
	}
	// A binary built with -race otherwise waits a second when it exits.
	env = append(env, "GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	return append(append(env, "XDG_DATA_HOME="+dir), extra...)
}

// runBinary runs bin with args and env, and returns what it printed and
// its exit code.
func runBinary(t *testing.T, bin string, env []string, args ...string) result {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), bin, args...)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("run %s: %v", bin, err)
	}
	return result{code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
}

func TestBinaryEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the calf binary")
	}
	dir := t.TempDir()
	const version = "v0.0.0-e2e"
	bin := buildCalf(t, dir, version)

	t.Run("run", func(t *testing.T) {
		srv, fake := newFakeServer(t)
		db := filepath.Join(dir, "x.db")
		notes := writeNote(t)
		env := calfEnv(dir, envBaseURL+"="+srv.URL())
		got := runBinary(t, bin, env, "run", "--store", "sqlite:"+db, "--model", "e2e-model", "--read", notes, "what does the note say?")
		want := result{
			code:   exitOK,
			stdout: "Let me read it.\nThe note says: hello from the note\n",
			stderr: "→ read_file {\"path\":\"note.txt\"}\n← 3 lines\n",
		}
		if diff := cmp.Diff(want, got, cmp.AllowUnexported(result{})); diff != "" {
			t.Errorf("calf run (-want +got):\n%s", diff)
		}
		var gotTurns [][]turn
		for _, r := range fake.requests() {
			gotTurns = append(gotTurns, turns(r.Messages))
		}
		sys := turn{Role: model.RoleSystem, Text: defaultInstructions}
		user := turn{Role: model.RoleUser, Text: "what does the note say?"}
		wantTurns := [][]turn{
			{sys, user},
			{
				sys, user,
				{Role: model.RoleAssistant, Text: "Let me read it.", Calls: []string{"read_file"}},
				{Role: model.RoleTool, Text: "     1\thello from the note\n     2\tsecond line\n     3\tthird line\n"},
			},
		}
		if diff := cmp.Diff(wantTurns, gotTurns); diff != "" {
			t.Errorf("requests (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"e2e-model", "e2e-model"}, fake.requestedModels()); diff != "" {
			t.Errorf("requested models (-want +got):\n%s", diff)
		}
		if _, err := os.Stat(db); err != nil {
			t.Errorf("the store: %v", err)
		}
	})

	t.Run("model URL and JSON", func(t *testing.T) {
		srv, fake := newFakeServer(t)
		got := runBinary(t, bin, calfEnv(dir), "run", "--store", "memory:", "--model", srv.URL()+"#m", "--json", "hello")
		lines := strings.Split(strings.TrimSuffix(got.stdout, "\n"), "\n")
		if got.code != exitOK || len(lines) < 4 || !strings.Contains(lines[len(lines)-1], `"kind":"output"`) {
			t.Errorf("calf run --json = %d, stdout %q, stderr %q; want 0 and lines ending with the output", got.code, got.stdout, got.stderr)
		}
		if n := len(fake.requests()); n != 1 {
			t.Errorf("the server saw %d requests, want 1", n)
		}
	})

	t.Run("interrupt", func(t *testing.T) {
		if runtime.GOOS == "windows" {
			t.Skip("no SIGINT on Windows")
		}
		started := make(chan struct{})
		var once sync.Once
		srv := modeltest.NewServer(func(ctx context.Context, _ *model.Request) (*model.Response, error) {
			once.Do(func() { close(started) })
			<-ctx.Done() // a model that never answers
			return nil, ctx.Err()
		})
		defer srv.Close()
		cmd := exec.CommandContext(t.Context(), bin, "run", "--store", "memory:", "--model", srv.URL()+"#m", "--timeout", "1h", "hi")
		cmd.Env = calfEnv(dir)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		<-started
		if err := cmd.Process.Signal(os.Interrupt); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		got := result{code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
		want := result{code: exitInterrupted, stderr: "calf: interrupted\n"}
		if diff := cmp.Diff(want, got, cmp.AllowUnexported(result{})); diff != "" {
			t.Errorf("calf run interrupted (-want +got):\n%s", diff)
		}
	})

	t.Run("no model", func(t *testing.T) {
		got := runBinary(t, bin, calfEnv(dir), "run", "hello")
		want := result{code: exitUsage, stderr: noModelMessage}
		if diff := cmp.Diff(want, got, cmp.AllowUnexported(result{})); diff != "" {
			t.Errorf("calf run without a model (-want +got):\n%s", diff)
		}
	})

	t.Run("version", func(t *testing.T) {
		got := runBinary(t, bin, calfEnv(dir), "version")
		want := result{code: exitOK, stdout: "calf " + version + " " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + "\n"}
		if diff := cmp.Diff(want, got, cmp.AllowUnexported(result{})); diff != "" {
			t.Errorf("calf version (-want +got):\n%s", diff)
		}
	})
}
