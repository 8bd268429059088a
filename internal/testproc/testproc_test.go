package testproc_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/calf-go/calf/internal/testproc"
)

const childEnv = "CALF_TESTPROC_CHILD"

type childConfig struct {
	Greeting string `json:"greeting"`
	Fail     bool   `json:"fail"`
}

type line struct {
	Ev  string `json:"ev"`
	PID int    `json:"pid"`
}

func TestMain(m *testing.M) {
	testproc.Main(childEnv, runChild)
	os.Exit(m.Run())
}

// runChild reports its greeting, then "stopping" once its parent closes
// its standard input.
func runChild(ctx context.Context, cfg *childConfig) error {
	if cfg.Fail {
		return errors.New("told to fail")
	}
	testproc.Report(line{Ev: cfg.Greeting, PID: os.Getpid()})
	<-ctx.Done()
	testproc.Report(line{Ev: "stopping", PID: os.Getpid()})
	return nil
}

// output collects a child's lines.
type output struct {
	mu    sync.Mutex
	lines []string
	got   chan struct{}
}

func (o *output) add(b []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.lines = append(o.lines, string(b))
	select {
	case o.got <- struct{}{}:
	default:
	}
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return strings.Join(o.lines, "\n")
}

// A child reports through its standard output, lives until its standard
// input closes, and exits 0.
func TestStartAndStop(t *testing.T) {
	out := &output{got: make(chan struct{}, 1)}
	p, err := testproc.Start(childEnv, childConfig{Greeting: "hello"}, &testproc.Options{Stdout: out.add})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-out.got:
	case <-time.After(time.Minute):
		t.Fatal("no line from the child")
	}
	var first line
	if err := json.Unmarshal([]byte(out.String()), &first); err != nil || first != (line{Ev: "hello", PID: p.PID}) {
		t.Fatalf("the child's first line %q (%v); want hello from %d", out.String(), err, p.PID)
	}
	p.Stop(time.Minute)
	if !strings.HasSuffix(out.String(), `"ev":"stopping","pid":`+strconv.Itoa(p.PID)+`}`) {
		t.Errorf("output after Stop: %q; want the child to have seen its standard input close", out.String())
	}
	if code := p.Cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
}

// A child whose run fails says why on its standard error and exits 1; a
// killed child exits at once.
func TestFailAndKill(t *testing.T) {
	errOut := &output{got: make(chan struct{}, 1)}
	p, err := testproc.Start(childEnv, childConfig{Fail: true}, &testproc.Options{Stderr: errOut.add})
	if err != nil {
		t.Fatal(err)
	}
	<-p.Exited()
	if code := p.Cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(errOut.String(), "told to fail") {
		t.Errorf("exit code %d, standard error %q; want 1 and the error", code, errOut.String())
	}

	p, err = testproc.Start(childEnv, childConfig{Greeting: "hi"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Exited():
	case <-time.After(time.Minute):
		t.Fatal("the killed child did not exit")
	}
	if p.Cmd.ProcessState.Success() {
		t.Error("the killed child exited successfully")
	}
}
