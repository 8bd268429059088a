package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/adapters"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/deadletter"
	"github.com/calf-go/calf/internal/testwait"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
)

// natsServer returns the URL of the test NATS server, or skips the test
// when it does not answer (fails it when CALF_TEST_SERVICES is set).
func natsServer(t *testing.T) string {
	t.Helper()
	raw := os.Getenv("CALF_TEST_NATS_URL")
	if raw == "" {
		raw = "nats://127.0.0.1:4222"
	}
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("CALF_TEST_NATS_URL: %v", err)
	}
	conn, err := net.DialTimeout("tcp", u.Host, 2*time.Second)
	if err != nil {
		if os.Getenv("CALF_TEST_SERVICES") != "" {
			t.Fatalf("NATS is unreachable: %v", err)
		}
		t.Skipf("NATS is unreachable (set CALF_TEST_NATS_URL): %v", err)
	}
	conn.Close()
	return raw
}

// natsBrokerURL returns a --broker URL on the test NATS server with a
// stream and a subject prefix of the test's own, deleted when the test
// ends.
func natsBrokerURL(t *testing.T) string {
	t.Helper()
	server := natsServer(t)
	name := "calfcli" + calf.NewID()[:12]
	t.Cleanup(func() {
		nc, err := natsgo.Connect(server)
		if err != nil {
			t.Errorf("delete the test stream: %v", err)
			return
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err == nil {
			err = js.DeleteStream(context.Background(), name)
		}
		if err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
			t.Errorf("delete the test stream: %v", err)
		}
	})
	return server + "?stream=" + name + "&prefix=" + name + "&partitions=4"
}

// logWatcher is a buffer safe for concurrent use that can wait for a
// string to be written.
type logWatcher struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{}
}

func newLogWatcher() *logWatcher { return &logWatcher{changed: make(chan struct{})} }

func (w *logWatcher) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.buf.Write(p)
	close(w.changed)
	w.changed = make(chan struct{})
	return n, err
}

func (w *logWatcher) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// waitFor waits until s has been written, or until exited is closed or
// the test ends, which fail the test.
func (w *logWatcher) waitFor(t *testing.T, s string, exited <-chan struct{}) {
	t.Helper()
	for {
		w.mu.Lock()
		found, changed := strings.Contains(w.buf.String(), s), w.changed
		w.mu.Unlock()
		if found {
			return
		}
		select {
		case <-changed:
		case <-exited:
			t.Fatalf("the process exited before writing %q:\n%s", s, w.String())
		case <-t.Context().Done():
			t.Fatalf("%q was not written:\n%s", s, w.String())
		}
	}
}

// startWorker runs calf worker with args in this process until ctx ends,
// and returns once it serves. The returned channel gives its exit code.
func startWorker(t *testing.T, ctx context.Context, args ...string) (<-chan int, *logWatcher) {
	t.Helper()
	stderr := newLogWatcher()
	code, exited := make(chan int, 1), make(chan struct{})
	go func() {
		code <- Main(ctx, append([]string{"worker"}, args...), strings.NewReader(""), &bytes.Buffer{}, stderr)
		close(exited)
	}()
	stderr.waitFor(t, "calf worker: serving", exited)
	return code, stderr
}

// waitDeadLetters lists the dead letters of storeURL until there are n.
func waitDeadLetters(t *testing.T, storeURL string, n int) []*deadletter.Record {
	t.Helper()
	var recs []*deadletter.Record
	testwait.ForErr(t, 30*time.Second, fmt.Sprintf("%d dead letters", n), func() error {
		got := runMain(t.Context(), "", "deadletters", "list", "--json", "--store", storeURL)
		if got.code != exitOK {
			t.Fatalf("calf deadletters list = %d, stderr %q", got.code, got.stderr)
		}
		recs = nil
		dec := json.NewDecoder(strings.NewReader(got.stdout))
		for dec.More() {
			var r deadletter.Record
			if err := dec.Decode(&r); err != nil {
				t.Fatalf("calf deadletters list --json: %v\n%s", err, got.stdout)
			}
			recs = append(recs, &r)
		}
		if len(recs) < n {
			return fmt.Errorf("%d recorded", len(recs))
		}
		return nil
	})
	return recs
}

// kafkaBrokerURL returns a --broker URL on an in-process Kafka cluster
// that lives as long as the test.
func kafkaBrokerURL(t *testing.T) string {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return "kafka://" + strings.Join(c.ListenAddrs(), ",") + "?partitions=4"
}

// Two workers on NATS, and on Kafka, serve runs that callers elsewhere
// start; a poison message is parked without holding up the others, shows
// in calf deadletters, and replays; the workers drain and exit 0 when
// stopped.
func TestWorkersAndDeadLetters(t *testing.T) {
	t.Run("nats", func(t *testing.T) { testWorkersAndDeadLetters(t, natsBrokerURL(t), true) })
	// On Kafka a caller following a run discovers the topics that the
	// workers create after it subscribed only at its next metadata refresh
	// (broker/kafka's MetadataMaxAge), so the first run ever may end before
	// the caller saw its first step: only its answer is certain.
	t.Run("kafka", func(t *testing.T) { testWorkersAndDeadLetters(t, kafkaBrokerURL(t), false) })
}

// testWorkersAndDeadLetters is TestWorkersAndDeadLetters on brokerURL.
// firstRunComplete says whether the first run's view shows every step.
func testWorkersAndDeadLetters(t *testing.T, brokerURL string, firstRunComplete bool) {
	isolate(t)
	storeURL := "sqlite:" + filepath.Join(t.TempDir(), "calf.db")
	srv, fake := newFakeServer(t)
	notes := writeNote(t)

	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	workerArgs := []string{"--broker", brokerURL, "--store", storeURL, "--model", srv.URL() + "#m", "--read", notes}
	codes := make([]<-chan int, 2)
	logs := make([]*logWatcher, 2)
	for i := range codes {
		codes[i], logs[i] = startWorker(t, ctx, workerArgs...)
	}

	// A caller without a model runs the agent the workers serve.
	caller := func(prompt string) result {
		return runMain(t.Context(), "", "run", "--broker", brokerURL, "--store", storeURL, prompt)
	}
	got := caller("what does the note say?")
	want := result{code: exitOK, stdout: "Let me read it.\nThe note says: hello from the note\n", stderr: "→ read_file {\"path\":\"note.txt\"}\n← 3 lines\n"}
	if firstRunComplete && got != want || got.code != exitOK || !strings.HasSuffix(got.stdout, "The note says: hello from the note\n") {
		t.Errorf("calf run against the workers = %+v, want %+v", got, want)
	}
	if n := len(fake.requests()); n != 2 {
		t.Errorf("the model saw %d requests, want 2", n)
	}

	// A poison message: an input the handler cannot decode.
	b, err := adapters.OpenBroker(t.Context(), brokerURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	poison := &calf.Message{
		ID: "poison-1", Channel: agent.InputChannel(agentName), Key: "poison-run",
		Data:     json.RawMessage(`{"content":5}`),
		Metadata: calf.Metadata{RunID: "poison-run", CorrelationID: "poison-run", Time: time.Now()},
	}
	if err := b.Publish(t.Context(), poison); err != nil {
		t.Fatal(err)
	}
	recs := waitDeadLetters(t, storeURL, 1)
	dl := recs[0]
	if dl.Message == nil || dl.Message.ID != "poison-1" || dl.Message.Channel != poison.Channel || dl.Group != poison.Channel || dl.Attempts < 1 || dl.Error == "" {
		t.Errorf("dead letter = %+v", dl)
	}

	// Other runs are unaffected, concurrently too.
	var wg sync.WaitGroup
	for _, p := range []string{"one", "two", "three"} {
		wg.Go(func() {
			// The agent has tools: the fake model reads the note first.
			if got := caller(p); got != want {
				t.Errorf("calf run %q = %+v, want %+v", p, got, want)
			}
		})
	}
	wg.Wait()

	list := runMain(t.Context(), "", "deadletters", "list", "--store", storeURL)
	lines := strings.Split(strings.TrimSuffix(list.stdout, "\n"), "\n")
	if list.code != exitOK || len(lines) != 2 || !strings.HasPrefix(lines[0], "ID ") ||
		!strings.HasPrefix(lines[1], dl.ID+" ") || !strings.Contains(lines[1], poison.Channel) {
		t.Errorf("calf deadletters list = %+v", list)
	}
	for _, col := range []string{"CHANNEL", "GROUP", "ATTEMPTS", "ERROR", "TIME", "REPLAYED"} {
		if !strings.Contains(lines[0], col) {
			t.Errorf("the list's header %q lacks %s", lines[0], col)
		}
	}
	show := runMain(t.Context(), "", "deadletters", "show", "--store", storeURL, dl.ID)
	var shown deadletter.Record
	if err := json.Unmarshal([]byte(show.stdout), &shown); show.code != exitOK || err != nil || shown.ID != dl.ID || shown.Message.ID != "poison-1" {
		t.Errorf("calf deadletters show = %+v (%v)", show, err)
	}
	raw := runMain(t.Context(), "", "deadletters", "show", "--raw", "--store", storeURL, dl.ID)
	if raw.code != exitOK || raw.stdout != `{"content":5}` {
		t.Errorf("calf deadletters show --raw = %+v, want the original bytes", raw)
	}
	unknown := runMain(t.Context(), "", "deadletters", "show", "--store", storeURL, "no-such-id")
	if unknown.code != exitFailure || !strings.Contains(unknown.stderr, `no such dead letter: "no-such-id"`) {
		t.Errorf("calf deadletters show of an unknown id = %+v", unknown)
	}

	replay := runMain(t.Context(), "", "deadletters", "replay", "--broker", brokerURL, "--store", storeURL, dl.ID)
	wantOut := "replayed " + dl.ID + ": published poison-1.replay on " + poison.Channel + "\n"
	if replay.code != exitOK || replay.stdout != wantOut {
		t.Errorf("calf deadletters replay = %+v, want stdout %q", replay, wantOut)
	}
	again := runMain(t.Context(), "", "deadletters", "replay", "--broker", brokerURL, "--store", storeURL, dl.ID)
	if again.code != exitOK || !strings.Contains(again.stdout, "was replayed already") {
		t.Errorf("calf deadletters replay, again = %+v", again)
	}
	unknown = runMain(t.Context(), "", "deadletters", "replay", "--broker", brokerURL, "--store", storeURL, "no-such-id")
	if unknown.code != exitFailure || !strings.Contains(unknown.stderr, "no such dead letter") {
		t.Errorf("calf deadletters replay of an unknown id = %+v", unknown)
	}
	// The republished message reached the workers, which parked it again,
	// since its fault is in the message itself.
	recs = waitDeadLetters(t, storeURL, 2)
	var replayed, reparked bool
	for _, r := range recs {
		switch r.Message.ID {
		case "poison-1":
			replayed = r.Replayed() && r.ReplayID == "poison-1.replay"
		case "poison-1.replay":
			reparked = true
		}
	}
	if !replayed || !reparked {
		t.Errorf("after the replay: replayed %t, parked again %t", replayed, reparked)
	}

	stop() // as SIGTERM does
	for i, code := range codes {
		if c := waitExit(t, code, logs[i]); c != exitOK {
			t.Errorf("worker %d exited with %d, want 0:\n%s", i, c, logs[i].String())
		}
		if log := logs[i].String(); !strings.Contains(log, "calf worker: draining") || !strings.Contains(log, "calf worker: stopped") {
			t.Errorf("worker %d's log lacks the drain:\n%s", i, log)
		}
	}
}

// calf run serves the agent itself on an in-process broker, and on a
// shared one with --serve, with no worker anywhere.
func TestRunServesOnBrokers(t *testing.T) {
	for _, tc := range []struct {
		name   string
		broker func(t *testing.T) string
		serve  bool
	}{
		{"nats+embedded", func(t *testing.T) string { return "nats+embedded://" + t.TempDir() }, false},
		{"nats --serve", natsBrokerURL, true},
		{"kafka --serve", kafkaBrokerURL, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			isolate(t)
			srv, _ := newFakeServer(t)
			args := []string{"run", "--broker", tc.broker(t), "--store", "memory:", "--model", srv.URL() + "#m"}
			if tc.serve {
				args = append(args, "--serve")
			}
			got := runMain(t.Context(), "", append(args, "hello")...)
			if want := (result{code: exitOK, stdout: "You said: hello\n"}); got != want {
				t.Errorf("Main(%q) = %+v, want %+v", args, got, want)
			}
		})
	}
}

// Two runs whose events share the one partition have their model calls in
// progress at once on one worker (a model call of one run holds up no
// other), and a worker that drains lets both finish: both runs complete.
func TestWorkerDrainFinishesRunsOfOnePartition(t *testing.T) {
	isolate(t)
	brokerURL := strings.Replace(natsBrokerURL(t), "partitions=4", "partitions=1", 1)
	storeURL := "sqlite:" + filepath.Join(t.TempDir(), "calf.db")
	started, release := make(chan string, 4), make(chan struct{})
	srv := modeltest.NewServer(func(ctx context.Context, req *model.Request) (*model.Response, error) {
		prompt := lastUser(req)
		started <- prompt
		select {
		case <-release:
			return modeltest.Text("You said: " + prompt), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
	defer srv.Close()
	workerArgs := []string{"--broker", brokerURL, "--store", storeURL, "--model", srv.URL() + "#m"}

	ctxA, stopA := context.WithCancel(t.Context())
	defer stopA()
	codeA, logA := startWorker(t, ctxA, workerArgs...)

	run := func(prompt string) <-chan result {
		done := make(chan result, 1)
		go func() {
			var stdout, stderr bytes.Buffer
			code := Main(t.Context(), []string{"run", "--broker", brokerURL, "--store", storeURL, "--json", prompt}, strings.NewReader(""), &stdout, &stderr)
			done <- result{code: code, stdout: stdout.String(), stderr: stderr.String()}
		}()
		return done
	}
	first, second := run("first"), run("second")
	got := map[string]bool{}
	for range 2 {
		select {
		case p := <-started:
			got[p] = true
		case <-time.After(exitWait):
			t.Fatalf("model calls in progress at once: %v, want both runs'", got)
		}
	}

	stopA() // as SIGTERM does
	logA.waitFor(t, "calf worker: draining", nil)
	close(release)
	if c := waitExit(t, codeA, logA); c != exitOK {
		t.Fatalf("worker A exited with %d:\n%s", c, logA.String())
	}
	for name, ch := range map[string]<-chan result{"first": first, "second": second} {
		if res := waitResult(t, ch); res.code != exitOK || !strings.Contains(res.stdout, "You said: "+name) {
			t.Errorf("the %s run = %+v", name, res)
		}
	}
}

// exitWait bounds the waits for a worker or a run to end, so that one that
// never does fails the test with what it logged, rather than hanging it
// until the test binary's timeout.
const exitWait = 2 * time.Minute

// waitExit returns the exit code of a worker started by startWorker.
func waitExit(t *testing.T, code <-chan int, log *logWatcher) int {
	t.Helper()
	select {
	case c := <-code:
		return c
	case <-time.After(exitWait):
		t.Fatalf("the worker did not exit within %v; its log:\n%s", exitWait, log.String())
		return 0
	}
}

// waitResult returns the result of a run started in the background.
func waitResult(t *testing.T, done <-chan result) result {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(exitWait):
		t.Fatalf("the run did not end within %v", exitWait)
		return result{}
	}
}

// calf worker without a model, on a broker it cannot reach, says first
// that the broker cannot be reached: that is what to fix first.
func TestWorkerDeadBrokerBeforeModel(t *testing.T) {
	isolate(t)
	storeURL := "sqlite:" + filepath.Join(t.TempDir(), "calf.db")
	got := runMain(t.Context(), "", "worker", "--broker", "nats://127.0.0.1:1", "--store", storeURL)
	if got.code == exitOK || !strings.Contains(got.stderr, "--broker") || strings.Contains(got.stderr, "no model") {
		t.Errorf("exit %d, %s", got.code, got.stderr)
	}
	// A bad flag is still refused before any I/O.
	if got := runMain(t.Context(), "", "worker", "--broker", "nats://127.0.0.1:1", "--store", storeURL, "--mode", "nonsense"); got.code != exitUsage || !strings.Contains(got.stderr, "--mode") {
		t.Errorf("a bad flag is still refused before any I/O: exit %d, %s", got.code, got.stderr)
	}
}
