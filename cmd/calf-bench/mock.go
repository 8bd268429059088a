package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/calf-go/calf/model/modeltest"
)

// Where the mock runs: the values of -mock other than a URL.
const (
	mockProcess = "process"
	mockInproc  = "inproc"
)

// mockServer is a running W1 mock.
type mockServer struct {
	// url is the API's base URL, ending in /v1.
	url string
	// where says where the mock runs, for the report.
	where string
	// inproc reports that the mock runs in this process, so that its
	// allocations are counted with the client's.
	inproc bool
	close  func() error
}

// startMock starts or finds the mock that spec names: "process" (a child
// process of this binary), "inproc", or the base URL of a running mock.
// The mock it starts answers each chat completion after delay; a running
// mock answers as it was started (with -serve-mock -model-delay).
func startMock(ctx context.Context, spec string, h modeltest.ServerHandler, delay time.Duration, stderr io.Writer) (*mockServer, error) {
	switch spec {
	case mockInproc:
		srv := modeltest.NewServer(delayed(h, delay))
		return &mockServer{url: srv.URL(), where: "in this process at " + srv.URL(), inproc: true,
			close: func() error { srv.Close(); return nil }}, nil
	case mockProcess, "":
		return startChild(ctx, delay, stderr)
	}
	u, err := url.Parse(spec)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: -mock %q: want %s, %s or an http(s) base URL", errUsage, spec, mockProcess, mockInproc)
	}
	return &mockServer{url: strings.TrimSuffix(spec, "/"), where: "external at " + spec, close: func() error { return nil }}, nil
}

// childStartTimeout bounds the wait for the child's URL.
const childStartTimeout = 30 * time.Second

// startChild runs this binary with -serve-mock as a child process and
// reads the mock's URL from the first line of its output. The child exits
// when its standard input closes, so it does not outlive this process. It
// answers each chat completion after delay.
func startChild(ctx context.Context, delay time.Duration, stderr io.Writer) (*mockServer, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("start the mock process: %w", err)
	}
	cmd := exec.Command(exe, "-serve-mock", "-stdin-lifeline", "-model-delay", delay.String())
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("start the mock process: %w", err)
	}
	first := &firstLine{line: make(chan string, 1)}
	cmd.Stdout = first
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the mock process: %w", err)
	}
	stop := func() error {
		_ = stdin.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			return err
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			return errors.New("the mock process did not exit when asked; killed it")
		}
	}
	var base string
	select {
	case base = <-first.line:
	case <-time.After(childStartTimeout):
	case <-ctx.Done():
	}
	if err := checkLoopback(base); err != nil {
		_ = cmd.Process.Kill()
		_ = stop()
		return nil, fmt.Errorf("start the mock process: %w", err)
	}
	return &mockServer{url: base, where: fmt.Sprintf("separate process (pid %d) at %s", cmd.Process.Pid, base), close: stop}, nil
}

// firstLine is a writer that sends the first line written to it, without
// its line end, on line, and discards everything.
type firstLine struct {
	line chan string // buffered
	mu   sync.Mutex
	buf  []byte
	done bool
}

func (f *firstLine) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.done {
		return len(p), nil
	}
	f.buf = append(f.buf, p...)
	if i := bytes.IndexByte(f.buf, '\n'); i >= 0 {
		f.line <- strings.TrimSpace(string(f.buf[:i]))
		f.done, f.buf = true, nil
	}
	return len(p), nil
}

// checkLoopback reports a base URL that is not an http URL on a loopback
// address.
func checkLoopback(base string) error {
	u, err := url.Parse(base)
	if err != nil || u.Scheme != "http" {
		return fmt.Errorf("want an http base URL, got %q", base)
	}
	ip := net.ParseIP(u.Hostname())
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("want a loopback address, got %q", base)
	}
	return nil
}

// serveMock serves W1 on a free loopback port, prints the base URL on the
// first line of stdout, and serves until ctx ends or, with lifeline, stdin
// closes.
func serveMock(ctx context.Context, stdin io.Reader, lifeline bool, stdout io.Writer, h modeltest.ServerHandler) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	srv := modeltest.NewServer(h)
	defer srv.Close()
	if _, err := fmt.Fprintln(stdout, srv.URL()); err != nil {
		return err
	}
	if lifeline {
		go func() {
			_, _ = io.Copy(io.Discard, stdin)
			cancel()
		}()
	}
	<-ctx.Done()
	return nil
}
