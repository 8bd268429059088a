package testproc

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"time"
)

// maxLine bounds a line of a child's output; the rest of a longer line's
// output is read and dropped.
const maxLine = 4 << 20

// Main runs the child process when the environment variable env is set,
// and then exits: with 2 when the variable does not hold a configuration
// C as JSON, 1 when run returns an error (written on standard error), 0
// otherwise. When env is not set it returns at once. The context given to
// run ends when the parent closes the child's standard input.
func Main[C any](env string, run func(ctx context.Context, config *C) error) {
	raw := os.Getenv(env)
	if raw == "" {
		return
	}
	var cfg C
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fmt.Fprintf(os.Stderr, "%s: bad configuration: %v\n", env, err)
		os.Exit(2)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		// The parent holds our standard input: when it closes, stop.
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	err := run(ctx, &cfg)
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s %d: %v\n", env, os.Getpid(), err)
		os.Exit(1)
	}
	os.Exit(0)
}

var reportMu sync.Mutex

// Report writes v as a line of JSON on standard output, in a single
// write, so that the line reaches the parent whole even if the process is
// killed right after. It is safe for concurrent use.
func Report(v any) {
	line, err := json.Marshal(v)
	if err != nil {
		line, _ = json.Marshal(map[string]string{"error": err.Error()})
	}
	reportMu.Lock()
	defer reportMu.Unlock()
	_, _ = os.Stdout.Write(append(line, '\n'))
}

// Command returns the command that runs the test binary again, running
// no test, with env set to config as JSON: a child for [Main] to run.
func Command(env string, config any) (*exec.Cmd, error) {
	raw, err := json.Marshal(config)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env+"="+string(raw))
	return cmd, nil
}

// Options says what becomes of a child's output. A nil *Options drops
// it.
type Options struct {
	// Stdout is called with each line the child writes on its standard
	// output, without the newline, in order, on one goroutine; the line
	// is valid only during the call. Nil drops them.
	Stdout func(line []byte)
	// Stderr is the same for the child's standard error.
	Stderr func(line []byte)
}

// Process is a child process started by [Start].
type Process struct {
	// Cmd is the child's command; PID its process id.
	Cmd *exec.Cmd
	PID int

	stdin  io.Closer
	exited chan struct{}
}

// Start starts the child that [Command] describes, with its output
// handled as opts says.
func Start(env string, config any, opts *Options) (*Process, error) {
	if opts == nil {
		opts = &Options{}
	}
	cmd, err := Command(env, config)
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &Process{Cmd: cmd, PID: cmd.Process.Pid, stdin: stdin, exited: make(chan struct{})}
	var read sync.WaitGroup
	read.Go(func() { readLines(stdout, opts.Stdout) })
	read.Go(func() { readLines(stderr, opts.Stderr) })
	go func() {
		// Wait closes the pipes: only once they are read to the end.
		read.Wait()
		_ = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// readLines calls f with each line of r, and reads r to its end.
func readLines(r io.Reader, f func([]byte)) {
	if f != nil {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), maxLine)
		for sc.Scan() {
			f(sc.Bytes())
		}
	}
	_, _ = io.Copy(io.Discard, r)
}

// Exited returns a channel closed once the child has exited and its
// output is read to the end.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Kill kills the child (SIGKILL on Unix), at once: nothing more of it runs.
// It does not wait for the child to exit.
func (p *Process) Kill() error { return p.Cmd.Process.Kill() }

// Stop asks the child to stop, by closing its standard input, kills it if
// it has not exited within grace, and waits until it has exited.
func (p *Process) Stop(grace time.Duration) {
	_ = p.stdin.Close()
	select {
	case <-p.exited:
	case <-time.After(grace):
		_ = p.Kill()
		<-p.exited
	}
}

// CloseStdin closes the child's standard input, asking it to stop,
// without waiting.
func (p *Process) CloseStdin() error { return p.stdin.Close() }
