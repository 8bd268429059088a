package builtin_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/calf-go/calf/tool"
	"github.com/calf-go/calf/tool/builtin"
)

// bashModes are the sandbox modes the behaviour common to both is checked
// in: off always, required where bubblewrap works (and in CI, which
// installs it).
func bashModes(t *testing.T) []builtin.Sandbox {
	modes := []builtin.Sandbox{builtin.SandboxOff}
	if _, err := builtin.Bash(t.TempDir(), &builtin.BashOptions{Sandbox: builtin.SandboxRequired}); err == nil {
		modes = append(modes, builtin.SandboxRequired)
	} else if os.Getenv("CALF_TEST_SERVICES") != "" {
		t.Errorf("no sandbox for the bash tool (install bubblewrap): %v", err)
	}
	return modes
}

func newBash(t *testing.T, root string, opts builtin.BashOptions) *builtin.BashTool {
	t.Helper()
	b, err := builtin.Bash(root, &opts)
	if err != nil {
		t.Fatal(err)
	}
	if k := tool.KindOf(b); k != tool.KindExecute {
		t.Errorf("bash is %q, want %q", k, tool.KindExecute)
	}
	return b
}

func TestBash(t *testing.T) {
	for _, mode := range bashModes(t) {
		t.Run(string(mode), func(t *testing.T) {
			root := newTree(t)
			b := newBash(t, root, builtin.BashOptions{Sandbox: mode})
			if b.Sandboxed() != (mode == builtin.SandboxRequired) {
				t.Errorf("Sandboxed() = %v in mode %s", b.Sandboxed(), mode)
			}
			out, err := call(t, b, map[string]any{"command": "echo hi; pwd; echo err >&2"})
			if err != nil {
				t.Fatal(err)
			}
			realRoot, _ := filepath.EvalSymlinks(root)
			for _, want := range []string{"hi\n", realRoot + "\n", "err\n", "[exit status 0"} {
				if !strings.Contains(out, want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
			// A workdir beneath the root, also through a link inside it.
			for _, wd := range []string{"src", "link_src"} {
				out, err = call(t, b, map[string]any{"command": "pwd", "workdir": wd})
				if err != nil || !strings.Contains(out, filepath.Join(realRoot, "src")+"\n") {
					t.Errorf("pwd in %s = %q, %v", wd, out, err)
				}
			}
			// Writes beneath the root land.
			if _, err := call(t, b, map[string]any{"command": "echo made > made.txt"}); err != nil {
				t.Fatal(err)
			}
			if got := readBack(t, filepath.Join(root, "made.txt")); got != "made\n" {
				t.Errorf("made.txt holds %q", got)
			}
			// A failing command is an error carrying its output and status.
			_, err = call(t, b, map[string]any{"command": "echo before; exit 3"})
			if err == nil || !strings.Contains(err.Error(), "status 3") || !strings.Contains(err.Error(), "before") {
				t.Errorf("exit 3: %v", err)
			}
		})
	}
}

func TestBashRefuses(t *testing.T) {
	root := newTree(t)
	b := newBash(t, root, builtin.BashOptions{Sandbox: builtin.SandboxOff})
	for _, tt := range []struct {
		name string
		args map[string]any
		want error
		text string
	}{
		{"empty command", map[string]any{"command": "  "}, nil, "empty"},
		{"workdir outside", map[string]any{"command": "pwd", "workdir": "../"}, builtin.ErrOutsideRoot, ""},
		{"workdir through a link outside", map[string]any{"command": "pwd", "workdir": "link_outdir"}, builtin.ErrOutsideRoot, ""},
		{"workdir a file", map[string]any{"command": "pwd", "workdir": "a.txt"}, nil, "not a directory"},
		{"negative timeout", map[string]any{"command": "true", "timeout_seconds": -1}, nil, "negative"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := call(t, b, tt.args)
			if err == nil {
				t.Fatal("the command ran")
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("error %v, want %v", err, tt.want)
			}
			if tt.text != "" && !strings.Contains(err.Error(), tt.text) {
				t.Errorf("error %v, want it to say %q", err, tt.text)
			}
		})
	}
	if _, err := builtin.Bash(root, &builtin.BashOptions{Sandbox: "maybe"}); err == nil {
		t.Error("an unknown sandbox mode was accepted")
	}
	if _, err := builtin.Bash(root, &builtin.BashOptions{Env: []string{"NOEQUALS"}}); err == nil {
		t.Error("an environment entry without = was accepted")
	}
	_, err := builtin.Bash(root, &builtin.BashOptions{Sandbox: builtin.SandboxRequired, Bwrap: "/nonexistent/bwrap"})
	if !errors.Is(err, builtin.ErrNoSandbox) {
		t.Errorf("required sandbox without bwrap: %v, want %v", err, builtin.ErrNoSandbox)
	}
	auto := newBash(t, root, builtin.BashOptions{Bwrap: "/nonexistent/bwrap"})
	if auto.Sandboxed() || !strings.Contains(auto.Definition().Description, "not sandboxed") {
		t.Errorf("auto without bwrap: sandboxed %v, description %q", auto.Sandboxed(), auto.Definition().Description)
	}
}

// A command past its timeout is killed with every process it started: a
// background child that would write a file later never does. The
// children hold a FIFO open for writing while they live: once the test
// reads its end, none is left to write.
func TestBashTimeoutKillsTheGroup(t *testing.T) {
	for _, mode := range bashModes(t) {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			b := newBash(t, root, builtin.BashOptions{Sandbox: mode, Timeout: 500 * time.Millisecond})
			fifo := filepath.Join(root, "alive")
			if err := syscall.Mkfifo(fifo, 0o600); err != nil {
				t.Fatal(err)
			}
			// Opened without blocking, the reader does not wait for a
			// writer.
			alive, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer alive.Close()
			start := time.Now()
			_, err = call(t, b, map[string]any{"command": "(exec 3>alive; echo x >&3; sleep 2; echo late > late.txt) & (sh -c 'exec 3>alive; echo y >&3; sleep 2; echo late > late2.txt') & echo started; sleep 30"})
			if err == nil || !strings.Contains(err.Error(), "stopped after") || !strings.Contains(err.Error(), "started") {
				t.Fatalf("timed-out command: %v", err)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("the timed-out command returned after %s", d)
			}
			if err := alive.SetReadDeadline(time.Now().Add(20 * time.Second)); err != nil {
				t.Fatal(err)
			}
			if got, err := io.ReadAll(alive); err != nil || len(got) != 4 {
				t.Fatalf("the children's FIFO: %q, %v; want both to have written to it, and gone", got, err)
			}
			for _, name := range []string{"late.txt", "late2.txt"} {
				if _, err := os.Stat(filepath.Join(root, name)); err == nil {
					t.Errorf("%s was written: a child outlived the timeout", name)
				}
			}
			// The model may ask for a shorter timeout, not a longer one.
			_, err = call(t, b, map[string]any{"command": "sleep 5", "timeout_seconds": 60})
			if err == nil || !strings.Contains(err.Error(), "500ms") {
				t.Errorf("timeout_seconds above the tool's: %v", err)
			}
		})
	}
}

// A command that prints 100 MB gets the head and the tail of it, within
// the limit, and runs to its end.
func TestBashHugeOutput(t *testing.T) {
	b := newBash(t, t.TempDir(), builtin.BashOptions{Sandbox: builtin.SandboxOff, MaxOutputBytes: 4096})
	out, err := call(t, b, map[string]any{"command": "echo FIRST; head -c 100000000 /dev/zero | tr '\\0' x; echo; echo LAST"})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) > 4096+200 {
		t.Errorf("output of %d bytes, over the limit of 4096", len(out))
	}
	for _, want := range []string{"FIRST", "LAST", "bytes of output left out"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if !strings.Contains(out, fmt.Sprint(100_000_000+len("FIRST\n\nLAST\n")-4096)) {
		t.Errorf("the count of bytes left out is wrong:\n%s...%s", out[:100], out[len(out)-200:])
	}
}

// Commands see a minimal environment: none of the process's secrets.
func TestBashEnvironment(t *testing.T) {
	t.Setenv("CALF_TEST_SECRET", "hunter2")
	b := newBash(t, t.TempDir(), builtin.BashOptions{Sandbox: builtin.SandboxOff, Env: []string{"GREETING=hello"}})
	out, err := call(t, b, map[string]any{"command": "env"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "hunter2") {
		t.Errorf("the process's secret reached the command:\n%s", out)
	}
	if !strings.Contains(out, "GREETING=hello") || !strings.Contains(out, "PATH=") {
		t.Errorf("the environment lacks GREETING or PATH:\n%s", out)
	}
}

// In the sandbox, the file system outside the root is read-only and there
// is no network; the root is writable.
func TestBashSandbox(t *testing.T) {
	if _, err := exec.LookPath("bwrap"); err != nil && os.Getenv("CALF_TEST_SERVICES") == "" {
		t.Skip("bubblewrap is not installed")
	}
	root := t.TempDir()
	outside := t.TempDir()
	b := newBash(t, root, builtin.BashOptions{Sandbox: builtin.SandboxRequired})
	for _, cmd := range []string{
		"echo x > " + filepath.Join(outside, "planted.txt"),
		"echo x > /etc/calf-planted",
		"exec 3<>/dev/tcp/127.0.0.1/5432",
		"exec 3<>/dev/tcp/1.1.1.1/53",
	} {
		if out, err := call(t, b, map[string]any{"command": cmd, "timeout_seconds": 10}); err == nil {
			t.Errorf("%q succeeded in the sandbox: %s", cmd, out)
		}
	}
	if _, err := os.Stat(filepath.Join(outside, "planted.txt")); err == nil {
		t.Error("a file was written outside the root")
	}
	if _, err := os.Stat("/etc/calf-planted"); err == nil {
		os.Remove("/etc/calf-planted")
		t.Error("a file was written in /etc")
	}
	// The root is writable, and /tmp is private.
	if _, err := call(t, b, map[string]any{"command": "echo ok > inside.txt && echo tmp > /tmp/calf-private"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/tmp/calf-private"); err == nil {
		os.Remove("/tmp/calf-private")
		t.Error("the sandbox's /tmp is the machine's")
	}
	if got := readBack(t, filepath.Join(root, "inside.txt")); got != "ok\n" {
		t.Errorf("inside.txt holds %q", got)
	}
}

// Cancelling the call's context stops the command.
func TestBashCancel(t *testing.T) {
	b := newBash(t, t.TempDir(), builtin.BashOptions{Sandbox: builtin.SandboxOff})
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := b.Call(ctx, []byte(`{"command":"sleep 30"}`))
	if err == nil || time.Since(start) > 5*time.Second {
		t.Errorf("cancelled command: %v after %s", err, time.Since(start))
	}
}

// outsideTmp makes a directory outside /tmp (which the sandbox replaces
// with its own anyway), where a server's home or store could be.
func outsideTmp(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/var/tmp", "calf-bash-test-")
	if err != nil {
		t.Skipf("no directory outside /tmp: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// A sandboxed command sees its root, the system's programs read-only, and
// nothing else: not the server's home, its store, the source tree it runs
// in, other directories of the machine, or the secrets of /etc.
func TestBashSandboxHides(t *testing.T) {
	if _, err := exec.LookPath("bwrap"); err != nil && os.Getenv("CALF_TEST_SERVICES") == "" {
		t.Skip("bubblewrap is not installed")
	}
	root := t.TempDir()
	home := filepath.Join(outsideTmp(t), "home")
	store := filepath.Join(outsideTmp(t), "share", "calf")
	write(t, filepath.Join(home, "secret.txt"), "user A's secret\n")
	write(t, filepath.Join(store, "calf.db"), "SQLite format 3\x00user A's secret\n")
	write(t, filepath.Join(store, "calf.db-wal"), "user A's secret\n")
	t.Setenv("HOME", home)
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	source, _ := filepath.Abs("bash_test.go")
	b := newBash(t, root, builtin.BashOptions{Sandbox: builtin.SandboxRequired})

	for _, cmd := range []string{
		"cat " + filepath.Join(home, "secret.txt"),
		"cat ~/secret.txt",
		"cat " + filepath.Join(store, "calf.db"),
		"cat " + filepath.Join(store, "calf.db-wal"),
		"ls " + filepath.Dir(store),
		"cat " + source,
		"ls " + wd,
		"ls /root/",
		"ls /var/tmp/",
		"grep -r secret /var /home /srv /opt /mnt /run",
		"head -c1 /etc/shadow | grep -q .",
	} {
		if out, err := call(t, b, map[string]any{"command": cmd, "timeout_seconds": 10}); err == nil {
			t.Errorf("%q succeeded in the sandbox: %s", cmd, out)
		} else if strings.Contains(err.Error(), "user A's secret") {
			t.Errorf("%q read the secret: %v", cmd, err)
		}
	}
	out, err := call(t, b, map[string]any{"command": "ls -a /"})
	if err != nil {
		t.Fatal(err)
	}
	listing, _, _ := strings.Cut(out, "\n[exit status")
	for _, name := range strings.Fields(listing) {
		switch name {
		case ".", "..", "usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc", "dev", "proc", "tmp":
		default:
			t.Errorf("ls / shows %q in the sandbox:\n%s", name, out)
		}
	}

	// Ordinary programs work, /bin included (a link on merged-/usr
	// systems), and the root is writable.
	script := "set -e; sh -c 'echo sh' > made.txt; ls /bin/sh /usr/bin >/dev/null; cat made.txt | grep -c sh; " +
		"id -u; test \"$HOME\" = \"$PWD\"; echo tmp > /tmp/x; cat /tmp/x"
	if _, err := exec.LookPath("python3"); err == nil {
		script += "; python3 -c 'print(6*7)'"
	}
	out, err = call(t, b, map[string]any{"command": script, "timeout_seconds": 30})
	if err != nil {
		t.Fatal(err)
	}
	if got := readBack(t, filepath.Join(root, "made.txt")); got != "sh\n" {
		t.Errorf("made.txt holds %q", got)
	}
	if _, err := exec.LookPath("python3"); err == nil && !strings.Contains(out, "42") {
		t.Errorf("python3 did not run:\n%s", out)
	}
}

// BashOptions.ReadOnly shows more paths, read-only, symbolic links
// included.
func TestBashSandboxReadOnly(t *testing.T) {
	if _, err := exec.LookPath("bwrap"); err != nil && os.Getenv("CALF_TEST_SERVICES") == "" {
		t.Skip("bubblewrap is not installed")
	}
	extra := outsideTmp(t)
	write(t, filepath.Join(extra, "tools", "tool.txt"), "a tool\n")
	link := filepath.Join(outsideTmp(t), "tools-link")
	if err := os.Symlink(filepath.Join(extra, "tools"), link); err != nil {
		t.Skipf("symbolic links: %v", err)
	}
	write(t, filepath.Join(extra, "other.txt"), "not shown\n")
	b := newBash(t, t.TempDir(), builtin.BashOptions{Sandbox: builtin.SandboxRequired, ReadOnly: []string{link}})
	out, err := call(t, b, map[string]any{"command": "cat " + filepath.Join(link, "tool.txt") + " " + filepath.Join(extra, "tools", "tool.txt")})
	if err != nil || strings.Count(out, "a tool") != 2 {
		t.Errorf("reading through ReadOnly: %q, %v", out, err)
	}
	for _, cmd := range []string{
		"echo x > " + filepath.Join(link, "planted.txt"),
		"cat " + filepath.Join(extra, "other.txt"),
	} {
		if out, err := call(t, b, map[string]any{"command": cmd}); err == nil {
			t.Errorf("%q succeeded in the sandbox: %s", cmd, out)
		}
	}
	if _, err := os.Stat(filepath.Join(extra, "tools", "planted.txt")); err == nil {
		t.Error("a file was written in a read-only path")
	}
	for _, bad := range []string{"relative/path", "/nonexistent/calf-bash-test"} {
		if _, err := builtin.Bash(t.TempDir(), &builtin.BashOptions{Sandbox: builtin.SandboxOff, ReadOnly: []string{bad}}); err == nil {
			t.Errorf("ReadOnly %q was accepted", bad)
		}
	}
}
