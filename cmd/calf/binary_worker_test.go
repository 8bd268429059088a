package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
)

// process is a calf process started in the background.
type process struct {
	cmd    *exec.Cmd
	stdout bytes.Buffer
	stderr *logWatcher
	exited chan struct{}
}

// startProcess starts bin with args and env.
func startProcess(t *testing.T, bin string, env []string, args ...string) *process {
	t.Helper()
	p := &process{cmd: exec.CommandContext(t.Context(), bin, args...), stderr: newLogWatcher(), exited: make(chan struct{})}
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.exited
	})
	return p
}

// wait waits for the process to exit and returns its exit code.
func (p *process) wait() int {
	<-p.exited
	return p.cmd.ProcessState.ExitCode()
}

// lastUser returns the text of the last user message of req.
func lastUser(req *model.Request) string {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == model.RoleUser {
			return req.Messages[i].Text()
		}
	}
	return ""
}

// postgresStoreURL returns a --store URL on the test PostgreSQL database
// whose tables live in a schema of the test's own, dropped when the test
// ends, and false when PostgreSQL is unreachable and CALF_TEST_SERVICES is
// unset.
func postgresStoreURL(t *testing.T) (string, bool) {
	t.Helper()
	base := os.Getenv("CALF_TEST_POSTGRES_URL")
	if base == "" {
		base = "postgres://127.0.0.1:5432/test"
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		if os.Getenv("CALF_TEST_SERVICES") != "" {
			t.Fatalf("PostgreSQL is unreachable: %v", err)
		}
		return "", false
	}
	defer conn.Close(context.Background())
	schema := "calf_cli_" + calf.NewID()[:12]
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), base)
		if err != nil {
			t.Errorf("drop the test schema: %v", err)
			return
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("drop the test schema: %v", err)
		}
	})
	sep := "?"
	if strings.Contains(base, "?") {
		sep = "&"
	}
	return base + sep + "search_path=" + schema, true
}

// A calf worker process on NATS and PostgreSQL (SQLite when PostgreSQL is
// unreachable) serves a calf run process that
// has no model of its own; SIGTERM drains the worker (the run in progress
// completes, exit 0), and a second signal ends it at once.
func TestBinaryWorker(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the calf binary")
	}
	if runtime.GOOS == "windows" {
		t.Skip("no SIGTERM on Windows")
	}
	brokerURL := natsBrokerURL(t)
	dir := t.TempDir()
	bin := buildCalf(t, dir, "v0.0.0-e2e")
	storeURL, ok := postgresStoreURL(t)
	if !ok {
		t.Log("PostgreSQL is unreachable: the store is a SQLite file")
		storeURL = "sqlite:" + filepath.Join(dir, "calf.db")
	}
	env := calfEnv(dir)

	fake := &fakeModel{}
	slowStarted, release := make(chan struct{}, 1), make(chan struct{})
	stuckStarted := make(chan struct{}, 1)
	srv := modeltest.NewServer(func(ctx context.Context, req *model.Request) (*model.Response, error) {
		switch lastUser(req) {
		case "slow":
			slowStarted <- struct{}{}
			select {
			case <-release:
				return modeltest.Text("slow answer"), nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		case "stuck":
			stuckStarted <- struct{}{}
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return fake.handle(ctx, req)
	})
	defer srv.Close()
	workerArgs := []string{"worker", "--broker", brokerURL, "--store", storeURL, "--model", srv.URL() + "#m"}

	worker := startProcess(t, bin, env, workerArgs...)
	worker.stderr.waitFor(t, "calf worker: serving", worker.exited)

	t.Run("remote run", func(t *testing.T) {
		got := runBinary(t, bin, env, "run", "--broker", brokerURL, "--store", storeURL, "hello")
		want := result{code: exitOK, stdout: "You said: hello\n"}
		if diff := cmp.Diff(want, got, cmp.AllowUnexported(result{})); diff != "" {
			t.Errorf("calf run --broker (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"m"}, fake.requestedModels()); diff != "" {
			t.Errorf("requested models (-want +got):\n%s", diff)
		}
	})

	t.Run("drain", func(t *testing.T) {
		caller := startProcess(t, bin, env, "run", "--broker", brokerURL, "--store", storeURL, "slow")
		<-slowStarted
		if err := worker.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		worker.stderr.waitFor(t, "calf worker: draining", worker.exited)
		close(release)
		if code := caller.wait(); code != exitOK || caller.stdout.String() != "slow answer\n" {
			t.Errorf("the caller = %d, stdout %q, stderr %q; want 0 and the answer", code, caller.stdout.String(), caller.stderr.String())
		}
		if code := worker.wait(); code != exitOK {
			t.Errorf("the drained worker exited with %d, want 0:\n%s", code, worker.stderr.String())
		}
		worker.stderr.waitFor(t, "calf worker: stopped", nil)
	})

	t.Run("second signal", func(t *testing.T) {
		w := startProcess(t, bin, env, workerArgs...)
		w.stderr.waitFor(t, "calf worker: serving", w.exited)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		caller := exec.CommandContext(ctx, bin, "run", "--broker", brokerURL, "--store", storeURL, "stuck")
		caller.Env = env
		if err := caller.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() {
			cancel()
			_ = caller.Wait()
		}()
		<-stuckStarted
		if err := w.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		w.stderr.waitFor(t, "calf worker: draining", w.exited)
		if err := w.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if code := w.wait(); code != exitInterrupted || !strings.Contains(w.stderr.String(), "calf: interrupted again: exiting at once") {
			t.Errorf("after a second signal the worker exited with %d, want %d at once:\n%s", code, exitInterrupted, w.stderr.String())
		}
	})
}
