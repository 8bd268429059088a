package builtin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/calf-go/calf/internal/proc"
	"github.com/calf-go/calf/tool"
)

// Sandbox says whether the bash tool runs commands in a sandbox.
type Sandbox string

const (
	// SandboxAuto runs commands in a bubblewrap sandbox when bwrap is
	// installed and works on the machine, and without one otherwise.
	SandboxAuto Sandbox = "auto"
	// SandboxRequired runs commands in a bubblewrap sandbox, and makes
	// [Bash] fail when none can be made.
	SandboxRequired Sandbox = "required"
	// SandboxOff runs commands without a sandbox.
	SandboxOff Sandbox = "off"
)

// Defaults of [BashOptions].
const (
	DefaultCommandTimeout = 2 * time.Minute
	DefaultMaxOutputBytes = 64 << 10
)

// ErrNoSandbox is returned by [Bash] with [SandboxRequired] when no
// sandbox can be made on the machine.
var ErrNoSandbox = errors.New("builtin: no sandbox for commands: bubblewrap (bwrap) is not installed or does not work here")

// BashOptions configure the bash tool. The zero value, like a nil
// *BashOptions, means the defaults.
type BashOptions struct {
	// Timeout bounds a command's run: at the timeout, the command and
	// every process it started are killed. The model may ask for a
	// shorter one. Default [DefaultCommandTimeout].
	Timeout time.Duration
	// MaxOutputBytes bounds the output returned to the model: the first
	// and the last half of it are kept, and what lies between is counted
	// but dropped. Default [DefaultMaxOutputBytes].
	MaxOutputBytes int
	// Sandbox chooses whether commands run in a sandbox. Default
	// [SandboxAuto].
	Sandbox Sandbox
	// Network lets sandboxed commands reach the network. Default: no
	// network (not even loopback) inside the sandbox.
	Network bool
	// ReadOnly lists absolute paths, files or directories, that sandboxed
	// commands see read-only besides the system's (see
	// [BashTool.Sandboxed]): a toolchain under /opt, say. A symbolic link
	// is shown as the link and its target. Default none.
	ReadOnly []string
	// Env is the environment of commands, as "KEY=value" strings, on top
	// of a minimal one (PATH, HOME set to the root, LANG, TERM). Nothing of
	// the calling process's environment is passed on: its secrets stay
	// out of the model's reach.
	Env []string
	// Shell runs the command, as Shell -c COMMAND. Default /bin/bash, or
	// /bin/sh where there is no bash.
	Shell string
	// Bwrap is the bubblewrap program. Default: bwrap from PATH.
	Bwrap string
}

// BashTool is the bash tool: it runs shell commands in a directory. It is a
// [tool.Tool] of kind [tool.KindExecute].
type BashTool struct {
	tool.Tool
	r         *fsRoot
	opts      BashOptions
	bwrap     string // the bubblewrap program; empty: not sandboxed
	sandboxed bool
	// real is the root with its symbolic links resolved: the path that
	// exists in the sandbox.
	real string
	// mounts are bubblewrap's arguments that build the sandbox's file
	// system.
	mounts []string
}

// Kind returns [tool.KindExecute].
func (b *BashTool) Kind() tool.Kind { return tool.KindExecute }

// Sandboxed reports whether commands run in a sandbox: in their own
// network, process, IPC and UTS namespaces, without network unless
// [BashOptions.Network], and killed with the tool's process. A sandboxed
// command sees only what it needs of the file system:
//
//   - the root directory, read-write (and HOME is the root);
//   - the system's programs, libraries and configuration, read-only:
//     /usr, /bin, /sbin, /lib, /lib32, /lib64, /libx32 and /etc, symbolic
//     links (merged /usr) kept as links; of /etc, the files that hold
//     secrets are hidden (/etc/shadow, /etc/gshadow and their backups,
//     /etc/sudoers, /etc/sudoers.d, /etc/ssh, /etc/ssl/private,
//     /etc/security/opasswd, /etc/krb5.keytab);
//   - the paths of [BashOptions.ReadOnly], read-only;
//   - a private /tmp, a minimal /dev and its own /proc.
//
// Nothing else is there: not the home directories, /root, /var, /srv,
// /opt, /mnt, /run, nor any other directory where a store, a key or
// another user's data may live.
//
// Without a sandbox a command can do whatever the process's user can;
// permission modes treat such a tool as one to ask about.
func (b *BashTool) Sandboxed() bool { return b.sandboxed }

type bashArgs struct {
	Command        string `json:"command" jsonschema:"the shell command to run"`
	Workdir        string `json:"workdir,omitempty" jsonschema:"the directory to run it in, relative to the working directory; default the working directory"`
	TimeoutSeconds int    `json:"timeout_seconds,omitempty" jsonschema:"stop the command after this many seconds; default and maximum: the tool's timeout"`
}

// Bash returns the bash tool, which runs a shell command in the directory
// root (or a directory beneath it) and returns its combined output and
// exit status. A command that exits with a non-zero status, or is stopped
// at its timeout, is an error result that carries its output. See
// [BashOptions] for the limits and the sandbox.
func Bash(root string, opts *BashOptions) (*BashTool, error) {
	r, err := newRoot(root, nil)
	if err != nil {
		return nil, err
	}
	var o BashOptions
	if opts != nil {
		o = *opts
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultCommandTimeout
	}
	if o.MaxOutputBytes <= 0 {
		o.MaxOutputBytes = DefaultMaxOutputBytes
	}
	if o.Sandbox == "" {
		o.Sandbox = SandboxAuto
	}
	if o.Shell == "" {
		o.Shell = "/bin/bash"
		if _, err := os.Stat(o.Shell); err != nil {
			o.Shell = "/bin/sh"
		}
	}
	for _, kv := range o.Env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return nil, fmt.Errorf("builtin: bash: environment entry %q is not KEY=value", kv)
		}
	}
	for _, p := range o.ReadOnly {
		if !filepath.IsAbs(p) {
			return nil, fmt.Errorf("builtin: bash: read-only path %q is not absolute", p)
		}
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("builtin: bash: read-only path: %w", err)
		}
	}
	real, err := filepath.EvalSymlinks(r.dir)
	if err != nil {
		return nil, fmt.Errorf("builtin: bash: root: %w", err)
	}
	b := &BashTool{r: r, opts: o, real: real}
	switch o.Sandbox {
	case SandboxOff:
	case SandboxAuto, SandboxRequired:
		if path, ok := probeBwrap(o.Bwrap); ok {
			b.bwrap, b.sandboxed = path, true
			if b.mounts, err = sandboxMounts(real, o.ReadOnly, o.Network); err != nil {
				return nil, fmt.Errorf("builtin: bash: %w", err)
			}
		} else if o.Sandbox == SandboxRequired {
			return nil, ErrNoSandbox
		}
	default:
		return nil, fmt.Errorf("builtin: bash: unknown sandbox mode %q (auto, required or off)", o.Sandbox)
	}
	desc := fmt.Sprintf("Run a shell command (%s -c) in the working directory, or in workdir beneath it, and "+
		"return its output (stdout and stderr together; at most %d bytes, the middle of a longer output "+
		"left out) and exit status. It is stopped, with every process it started, after %s or "+
		"timeout_seconds. ", filepath.Base(o.Shell), o.MaxOutputBytes, o.Timeout)
	if b.sandboxed {
		desc += "It runs in a sandbox: it sees the working directory, the system's programs and libraries " +
			"(read-only) and a private /tmp, and nothing else of the file system"
		if !o.Network {
			desc += ", and there is no network"
		}
		desc += "."
	} else {
		desc += "It is not sandboxed: it can do anything your user can."
	}
	t, err := tool.New("bash", desc, b.run)
	if err != nil {
		return nil, err
	}
	b.Tool = t
	return b, nil
}

// sandboxSystem are the system's directories a sandboxed command sees,
// read-only, where they exist.
var sandboxSystem = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc"}

// sandboxHidden are the paths of sandboxSystem that hold secrets: a
// sandboxed command sees them empty.
var sandboxHidden = []string{
	"/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/sudoers", "/etc/sudoers.d",
	"/etc/ssh", "/etc/ssl/private", "/etc/security/opasswd", "/etc/krb5.keytab",
}

// sandboxMounts returns bubblewrap's arguments that build a sandbox's file
// system: the system's directories and the paths of readOnly read-only,
// the root read-write, a private /tmp, /dev and /proc, and the secrets of
// /etc hidden. With network, the resolver's configuration is shown where
// /etc/resolv.conf links to.
func sandboxMounts(root string, readOnly []string, network bool) ([]string, error) {
	args := []string{"--tmpfs", "/tmp"}
	var bound []string // real directories bound so far
	beneath := func(p string) bool {
		for _, d := range bound {
			if rel, err := filepath.Rel(d, p); err == nil && filepath.IsLocal(rel) {
				return true
			}
		}
		return false
	}
	// show makes p visible read-only: a link as a link, with its target
	// unless that is visible already.
	show := func(p string) error {
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			args = append(args, "--ro-bind", p, p)
			bound = append(bound, p)
			return nil
		}
		target, err := os.Readlink(p)
		if err != nil {
			return err
		}
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			return err
		}
		if !beneath(real) {
			args = append(args, "--ro-bind", real, real)
			bound = append(bound, real)
		}
		args = append(args, "--symlink", target, p)
		return nil
	}
	// The system's real directories first, so that its links (/bin to
	// usr/bin) point into what is there.
	for _, links := range []bool{false, true} {
		for _, p := range sandboxSystem {
			fi, err := os.Lstat(p)
			if err != nil || (fi.Mode()&os.ModeSymlink != 0) != links {
				continue
			}
			if err := show(p); err != nil {
				return nil, err
			}
		}
	}
	for _, p := range readOnly {
		if err := show(filepath.Clean(p)); err != nil {
			return nil, fmt.Errorf("read-only path: %w", err)
		}
	}
	if network {
		if real, err := filepath.EvalSymlinks("/etc/resolv.conf"); err == nil && !beneath(real) {
			args = append(args, "--ro-bind", real, real)
		}
	}
	args = append(args, "--bind", root, root, "--dev", "/dev", "--proc", "/proc")
	for _, p := range sandboxHidden {
		fi, err := os.Stat(p)
		switch {
		case err != nil:
		case fi.IsDir():
			args = append(args, "--tmpfs", p, "--remount-ro", p)
		default:
			args = append(args, "--ro-bind", os.DevNull, p)
		}
	}
	return args, nil
}

// probeBwrap returns the bubblewrap program and whether it makes a sandbox
// here (it needs user namespaces, or to run as root).
func probeBwrap(path string) (string, bool) {
	if path == "" {
		path = "bwrap"
	}
	full, err := exec.LookPath(path)
	if err != nil {
		return "", false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = exec.CommandContext(ctx, full, "--ro-bind", "/", "/", "--dev", "/dev", "--unshare-net", "--unshare-pid",
		"--die-with-parent", "--", "/bin/sh", "-c", "exit 0").Run()
	return full, err == nil
}

func (b *BashTool) run(ctx context.Context, in bashArgs) (string, error) {
	if strings.TrimSpace(in.Command) == "" {
		return "", errors.New("command is empty")
	}
	if in.TimeoutSeconds < 0 {
		return "", errors.New("timeout_seconds must not be negative")
	}
	dir, err := b.workdir(in.Workdir)
	if err != nil {
		return "", err
	}
	timeout := b.opts.Timeout
	if in.TimeoutSeconds > 0 {
		timeout = min(timeout, time.Duration(in.TimeoutSeconds)*time.Second)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	var cmd *exec.Cmd
	if b.sandboxed {
		args := append(b.mounts[:len(b.mounts):len(b.mounts)], "--chdir", dir,
			"--unshare-pid", "--unshare-ipc", "--unshare-uts", "--die-with-parent", "--new-session")
		if !b.opts.Network {
			args = append(args, "--unshare-net")
		}
		args = append(args, "--", b.opts.Shell, "-c", in.Command)
		cmd = exec.Command(b.bwrap, args...)
	} else {
		cmd = exec.Command(b.opts.Shell, "-c", in.Command)
	}
	cmd.Dir = dir
	home := b.r.dir
	if b.sandboxed {
		home = b.real
	}
	cmd.Env = append([]string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=" + home, "LANG=C.UTF-8", "TERM=dumb",
	}, b.opts.Env...)
	cmd.Stdin = nil
	out := &boundedOutput{max: b.opts.MaxOutputBytes}
	cmd.Stdout, cmd.Stderr = out, out
	// Its own process group, killed whole.
	proc.Group(cmd)
	// Once the shell has exited, a process it left running in the
	// background may hold the output open: Wait gives up on it after a
	// second, and the group is killed below.
	cmd.WaitDelay = time.Second
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("starting the command: %w", err)
	}
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			_ = proc.Kill(cmd)
		case <-done:
		}
	}()
	err = cmd.Wait()
	close(done)
	// Nothing the command started outlives it.
	_ = proc.Kill(cmd)
	text := out.String()
	elapsed := time.Since(start).Round(time.Millisecond)
	switch {
	case ctx.Err() == context.DeadlineExceeded:
		return "", fmt.Errorf("the command was stopped after %s, its time limit, with every process it started; its output:\n%s", timeout, text)
	case ctx.Err() != nil:
		return "", ctx.Err()
	case err != nil && !errors.Is(err, exec.ErrWaitDelay):
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return "", fmt.Errorf("the command exited with status %d after %s; its output:\n%s", ee.ExitCode(), elapsed, text)
		}
		return "", fmt.Errorf("the command failed: %w", err)
	}
	if text == "" {
		text = "(no output)"
	}
	return fmt.Sprintf("%s\n[exit status 0, %s]", strings.TrimSuffix(text, "\n"), elapsed), nil
}

// workdir returns the absolute directory a command runs in: p beneath the
// root.
func (b *BashTool) workdir(p string) (string, error) {
	rel, err := b.r.rel(p)
	if err != nil {
		return "", err
	}
	root, err := b.r.open()
	if err != nil {
		return "", err
	}
	defer root.Close()
	fi, err := root.Stat(rel)
	if err != nil {
		return "", pathError(rel, err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("workdir %q is not a directory", display(rel))
	}
	// Stat followed any links inside the root; the real directory is
	// what the command gets.
	real, err := filepath.EvalSymlinks(filepath.Join(b.r.dir, rel))
	if err != nil {
		return "", pathError(rel, err)
	}
	if r, err := filepath.Rel(b.r.dir, real); err != nil || !filepath.IsLocal(r) && r != "." {
		return "", fmt.Errorf("%w: workdir %q", ErrOutsideRoot, display(rel))
	}
	return real, nil
}

// boundedOutput keeps the first and the last max/2 bytes written to it and
// counts the rest.
type boundedOutput struct {
	mu      sync.Mutex
	max     int
	head    []byte
	tail    []byte // a ring of max/2 bytes once full
	next    int    // where the ring writes next
	dropped int64
}

func (o *boundedOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := len(p)
	half := o.max / 2
	if room := half - len(o.head); room > 0 {
		k := min(room, len(p))
		o.head = append(o.head, p[:k]...)
		p = p[k:]
	}
	tailMax := o.max - half
	for len(p) > 0 {
		if len(o.tail) < tailMax {
			k := min(tailMax-len(o.tail), len(p))
			o.tail = append(o.tail, p[:k]...)
			p = p[k:]
			continue
		}
		// The ring is full: each byte written pushes out the oldest.
		if len(p) >= tailMax {
			o.dropped += int64(tailMax) + int64(len(p)-tailMax)
			copy(o.tail, p[len(p)-tailMax:])
			o.next = 0
			break
		}
		k := min(tailMax-o.next, len(p))
		copy(o.tail[o.next:], p[:k])
		o.next = (o.next + k) % tailMax
		o.dropped += int64(k)
		p = p[k:]
	}
	return n, nil
}

func (o *boundedOutput) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var sb strings.Builder
	sb.Write(o.head)
	if o.dropped > 0 {
		fmt.Fprintf(&sb, "\n[... %d bytes of output left out ...]\n", o.dropped)
	}
	sb.Write(o.tail[o.next:])
	sb.Write(o.tail[:o.next])
	return sb.String()
}
