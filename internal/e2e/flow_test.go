package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/adapters"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/internal/chaos"
	"github.com/calf-go/calf/internal/flow"
	"github.com/calf-go/calf/internal/testwait"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/model/openai"
	"github.com/calf-go/calf/store"
)

// Flow control per key across a kill -9: one agent, a prototype with
// flow {key: first_word, concurrency: 2}, is served by two calf worker
// processes (the real command, --agents FILE) on a NATS server and a
// PostgreSQL of the test's own. Sixty runs over six keys are submitted
// at once from this process, so that most of them wait for a slot as
// records in the store. While the first worker is in the middle of model
// calls (runs holding slots) and other runs wait, it is killed with
// SIGKILL; a third worker starts a moment later. Every run completes; no
// key ever has more than two model calls in flight at the fake model;
// each run reaches the model once, but for a run whose model call the
// killed worker had made and not recorded (cut by the kill, or answered
// just before it): its call is made again by the worker that carries the
// run on, so the model's requests are at least the runs and at most the
// runs plus those the killed worker had in hand; and once every run has
// ended, no run waits and no key holds a slot in the store.
//
// CALF_FLOW_E2E=KEYSxPERKEY sets the load (default 6x10): 100x100 is
// the 10,000 runs over 100 keys of the benchmarks page, a run of some
// minutes kept out of CI.
func TestFlowControlAcrossKillNATSPostgres(t *testing.T) {
	const (
		limit = 2
		// hold is how long the fake model takes to answer.
		hold = 250 * time.Millisecond
	)
	keys, perKey := 6, 10
	if v := os.Getenv("CALF_FLOW_E2E"); v != "" {
		k, n, ok := strings.Cut(v, "x")
		var err1, err2 error
		keys, err1 = strconv.Atoi(k)
		perKey, err2 = strconv.Atoi(n)
		if !ok || err1 != nil || err2 != nil || keys < 1 || perKey < 1 {
			t.Fatalf("CALF_FLOW_E2E=%q: want KEYSxPERKEY, such as 100x100", v)
		}
	}
	runs := keys * perKey
	// The waits: what the runs take one after another on a key, twice
	// over, and 30 ms a run (what three workers on two cores do), beyond
	// the harness's own.
	waitTimeout := waitTimeout + 2*time.Duration(perKey/limit+1)*hold + time.Duration(runs)*30*time.Millisecond
	chaos.NeedPostgres(t)
	calfBin := buildCalf(t)
	natsURL := chaos.StartNATS(t)
	pgURL := chaos.StartPostgres(t)
	fm := newFlowModel(hold)
	srv := modeltest.NewServer(fm.answer)
	t.Cleanup(srv.Close)

	const name = "flowy"
	file := filepath.Join(t.TempDir(), "agents.yaml")
	if err := os.WriteFile(file, []byte(`prototypes:
  - name: `+name+`
    role: Answers
    system_prompt: You answer.
    flow: {key: first_word, concurrency: `+strconv.Itoa(limit)+`}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	brokerURL := natsURL + "?stream=FLOW&prefix=flow&partitions=8"

	// The caller: a runtime in this process on the workers' broker and
	// store, serving nothing.
	b, err := adapters.OpenBroker(t.Context(), brokerURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := adapters.OpenStore(t.Context(), pgURL, nil)
	if err != nil {
		_ = b.Close()
		t.Fatal(err)
	}
	client := calf.NewClient(b, nil)
	t.Cleanup(func() {
		_ = client.Close()
		_ = b.Close()
		_ = st.Close()
	})
	rt := agent.NewRuntime(client, st, nil)
	handleModel, err := openai.New(openai.Options{Model: "unused", BaseURL: srv.URL(), APIKey: "e2e", MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	// A run waits for its slot as a record, which Wait follows; the long
	// StartTimeout covers an input that waits for its redelivery after
	// the kill before any record of its run exists.
	a, err := agent.New(name, handleModel, &agent.Options{StartTimeout: waitTimeout})
	if err != nil {
		t.Fatal(err)
	}

	// Each worker calls the model by a name of its own, so that the fake
	// model knows which process made a call.
	xdg := t.TempDir()
	startWorker := func(label string) *calfWorker {
		t.Helper()
		w := startCalfWorker(t, calfBin, xdg, "worker", "--broker", brokerURL, "--store", pgURL, "--agents", file, "--model", srv.URL()+"#"+label)
		w.label = label
		return w
	}
	w1, w2 := startWorker("w1"), startWorker("w2")
	w1.waitServing(t)
	w2.waitServing(t)

	ids := map[string]string{} // prompt → run id
	var prompts []string
	for i := range runs {
		p := fmt.Sprintf("k%d task %d", i%keys, i)
		id := fmt.Sprintf("flow-%02d-%s", i, calf.NewID()[:8])
		if _, err := a.Submit(t.Context(), rt, p, &agent.RunOptions{RunID: id}); err != nil {
			t.Fatal(err)
		}
		ids[p] = id
		prompts = append(prompts, p)
	}
	type result struct {
		prompt string
		out    *agent.Output[string]
		err    error
	}
	results := make(chan result, runs)
	wctx, wcancel := context.WithTimeout(t.Context(), waitTimeout)
	defer wcancel()
	for _, p := range prompts {
		go func() {
			out, err := a.Wait(wctx, rt, ids[p])
			results <- result{p, out, err}
		}()
	}

	// The kill: once a few runs have ended (slots were freed and taken
	// again), while runs wait for slots and the first worker has a model
	// call in flight that started moments ago (so that the kill cuts it).
	var waitingAtKill int
	for deadline := time.Now().Add(waitTimeout); ; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			answered, _ := fm.progress("w1", hold)
			t.Fatalf("the first worker was never in a model call while runs waited (%d calls answered)", answered)
		}
		if answered, fresh := fm.progress("w1", hold/3); answered < 2*limit || fresh == 0 {
			continue
		}
		recs, err := st.List(t.Context(), flow.KindWait, "", "", 0)
		if err != nil {
			t.Fatal(err)
		}
		if waitingAtKill = len(recs); waitingAtKill > 0 {
			break
		}
	}
	killedAt := time.Now()
	if err := w1.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-w1.exited
	// The runs whose model call the killed worker made and had not
	// ended: each may reach the model once more (a call cut by the kill,
	// or answered and not recorded). Nothing else carries them on before
	// the killed worker's partitions are free again, seconds later.
	inHand := map[string]bool{}
	for _, p := range fm.promptsOf("w1", killedAt) {
		v, err := rt.LoadRun(t.Context(), agent.RunRef{Kind: "agent", Name: name, RunID: ids[p]})
		if err != nil || !v.RunStatus().Terminal() {
			inHand[p] = true
		}
	}
	cutAtKill := fm.cut()
	t.Logf("killed w1 (pid %d) with %d runs waiting for a slot, %d model calls cut, %d runs in its hands",
		w1.cmd.Process.Pid, waitingAtKill, cutAtKill, len(inHand))
	time.Sleep(time.Second)
	w3 := startWorker("w3")
	w3.waitServing(t)

	failed := 0
	for range runs {
		var r result
		select {
		case r = <-results:
		case <-time.After(waitTimeout + 5*time.Second):
			t.Fatalf("a wait did not return")
		}
		want := "done: " + r.prompt
		switch {
		case r.err != nil:
			t.Errorf("run %s (%q): %v", ids[r.prompt], r.prompt, r.err)
			failed++
		case r.out.Output != want:
			t.Errorf("run %s: output %q, want %q", ids[r.prompt], r.out.Output, want)
			failed++
		}
	}
	if failed > 0 {
		t.Fatalf("%d of %d runs did not complete", failed, runs)
	}

	// The limit, at the model.
	peaks := fm.peaks()
	reached := 0
	for k, n := range peaks {
		if n > limit {
			t.Errorf("key %s: %d model calls in flight at once; the limit is %d", k, n, limit)
		}
		if n == limit {
			reached++
		}
	}
	if len(peaks) != keys || reached == 0 {
		t.Errorf("peaks per key %v: want %d keys, some at the limit %d", peaks, keys, limit)
	}
	// The model's requests: once per run, and once more at most for a
	// run the killed worker had in hand. A call the killed worker sent
	// just before it died can reach the model after the kill: it was in
	// flight, its run in hand.
	total, again, late := 0, 0, 0
	for _, p := range prompts {
		calls := fm.callsOf(p)
		if !inHand[p] && slices.ContainsFunc(calls, func(c flowCall) bool { return c.Worker == "w1" && !c.Start.Before(killedAt) }) {
			inHand[p] = true
			late++
		}
		total += len(calls)
		switch {
		case len(calls) == 0:
			t.Errorf("run %s (%q) never reached the model", ids[p], p)
		case len(calls) > 1:
			again++
			if len(calls) > 2 || !inHand[p] {
				t.Errorf("run %s (%q) reached the model %d times (%v); the killed worker had it in hand: %v", ids[p], p, len(calls), calls, inHand[p])
			}
		}
	}
	if total < runs || total > runs+len(inHand) {
		t.Errorf("%d model requests for %d runs; want %d to %d", total, runs, runs, runs+len(inHand))
	}
	if fm.cut() == 0 {
		t.Errorf("no model call was cut by the kill")
	}
	// The store: no run waits, no key holds a slot. A slot is freed by a
	// pass after its run's end, a poll later at most.
	testwait.ForErr(t, 30*time.Second, "no flow control records left", func() error {
		return flowLeftovers(t.Context(), st)
	})
	t.Logf("%d runs over %d keys completed; peak model calls in flight per key %v (limit %d); %d model requests (%d runs called again, %d calls cut by the kill, %d runs in the killed worker's hands, %d of them known by a call that reached the model after the kill); ended %s after the kill",
		runs, keys, peaks, limit, total, again, fm.cut(), len(inHand), late, time.Since(killedAt).Round(time.Millisecond))
	for _, w := range []*calfWorker{w2, w3} {
		w.stop(t)
	}
}

// flowLeftovers reports the flow control records left in st: waiting
// runs, index entries, debounce windows, and keys with runs holding a
// slot.
func flowLeftovers(ctx context.Context, st store.Store) error {
	var left []string
	for _, kind := range []string{flow.KindWait, flow.KindRun, flow.KindActive, flow.KindDebounce} {
		recs, err := st.List(ctx, kind, "", "", 0)
		if err != nil {
			return err
		}
		for _, r := range recs {
			left = append(left, kind+" "+r.ID)
		}
	}
	recs, err := st.List(ctx, flow.KindKey, "", "", 0)
	if err != nil {
		return err
	}
	for _, r := range recs {
		var ks struct {
			Running map[string]time.Time `json:"running"`
		}
		if err := json.Unmarshal(r.Data, &ks); err != nil {
			return fmt.Errorf("%s %s: %w", flow.KindKey, r.ID, err)
		}
		if len(ks.Running) > 0 {
			left = append(left, fmt.Sprintf("%s %s holds %d slots", flow.KindKey, r.ID, len(ks.Running)))
		}
	}
	if len(left) > 0 {
		return errors.New(strings.Join(left, "; "))
	}
	return nil
}

// flowModel is the fake model of the flow control test: it answers
// "done: PROMPT" after hold, and records every call by prompt, and the
// calls in flight by key (the prompt's first word) and their peak.
type flowModel struct {
	hold time.Duration

	mu       sync.Mutex
	calls    map[string][]flowCall
	inFlight map[string]int // by key
	peak     map[string]int // by key
}

// flowCall is one call of the fake model.
type flowCall struct {
	Worker     string // the model name the worker asked for
	Start, End time.Time
	Cut        bool // the caller went away before the answer
}

func newFlowModel(hold time.Duration) *flowModel {
	return &flowModel{hold: hold, calls: map[string][]flowCall{}, inFlight: map[string]int{}, peak: map[string]int{}}
}

func (m *flowModel) answer(ctx context.Context, req *model.Request) (*model.Response, error) {
	prompt := ""
	for _, msg := range req.Messages {
		if msg.Role == model.RoleUser {
			prompt = msg.Text()
		}
	}
	key, _, _ := strings.Cut(prompt, " ")
	m.mu.Lock()
	i := len(m.calls[prompt])
	m.calls[prompt] = append(m.calls[prompt], flowCall{Worker: modeltest.RequestedModel(ctx), Start: time.Now()})
	m.inFlight[key]++
	m.peak[key] = max(m.peak[key], m.inFlight[key])
	m.mu.Unlock()
	timer := time.NewTimer(m.hold)
	defer timer.Stop()
	cut := false
	select {
	case <-timer.C:
	case <-ctx.Done():
		cut = true
	}
	m.mu.Lock()
	m.inFlight[key]--
	m.calls[prompt][i].End, m.calls[prompt][i].Cut = time.Now(), cut
	m.mu.Unlock()
	if cut {
		return nil, ctx.Err()
	}
	return modeltest.Text("done: " + prompt), nil
}

// progress returns the calls answered so far, and those of worker in
// flight that started less than within ago.
func (m *flowModel) progress(worker string, within time.Duration) (answered, fresh int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, cs := range m.calls {
		for _, c := range cs {
			switch {
			case !c.End.IsZero():
				answered++
			case c.Worker == worker && time.Since(c.Start) < within:
				fresh++
			}
		}
	}
	return answered, fresh
}

// promptsOf returns the prompts worker called the model with before t.
func (m *flowModel) promptsOf(worker string, t time.Time) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for p, cs := range m.calls {
		if slices.ContainsFunc(cs, func(c flowCall) bool { return c.Worker == worker && c.Start.Before(t) }) {
			out = append(out, p)
		}
	}
	return out
}

// cut returns how many calls were cut so far.
func (m *flowModel) cut() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, cs := range m.calls {
		for _, c := range cs {
			if c.Cut {
				n++
			}
		}
	}
	return n
}

// callsOf returns the calls of prompt.
func (m *flowModel) callsOf(prompt string) []flowCall {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.calls[prompt])
}

// peaks returns the peak of the calls in flight by key.
func (m *flowModel) peaks() map[string]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]int{}
	for k, n := range m.peak {
		out[k] = n
	}
	return out
}

// calfWorker is a calf worker process.
type calfWorker struct {
	label  string
	cmd    *exec.Cmd
	out    *syncBuffer
	exited chan struct{}
}

// startCalfWorker starts the calf command bin with args, its data
// directory in xdg; it is killed when the test ends, and its output
// logged when the test failed.
func startCalfWorker(t *testing.T, bin, xdg string, args ...string) *calfWorker {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "XDG_DATA_HOME="+xdg, "OTEL_SDK_DISABLED=true")
	w := &calfWorker{cmd: cmd, out: &syncBuffer{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = w.out, w.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = cmd.Wait()
		close(w.exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-w.exited
		if t.Failed() {
			t.Logf("calf worker %s (pid %d):\n%s", w.label, cmd.Process.Pid, w.out.String())
		}
	})
	return w
}

// waitServing waits until the worker serves.
func (w *calfWorker) waitServing(t *testing.T) {
	t.Helper()
	testwait.ForErr(t, waitTimeout, "calf worker "+w.label+" to serve", func() error {
		select {
		case <-w.exited:
			t.Fatalf("calf worker %s exited:\n%s", w.label, w.out.String())
		default:
		}
		if !strings.Contains(w.out.String(), "calf worker: serving") {
			return errors.New("not yet")
		}
		return nil
	})
}

// stop stops the worker with SIGTERM (its drain), and waits until it
// exits.
func (w *calfWorker) stop(t *testing.T) {
	t.Helper()
	_ = w.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-w.exited:
	case <-time.After(20 * time.Second):
		t.Errorf("calf worker %s did not stop within 20s", w.label)
	}
}

// The NATS server and the PostgreSQL of the flow control test are its
// own: on free ports outside the ephemeral range (32768-60999, where a
// client's own port could take a server's) and never the machine's
// shared services', with their data in temporary directories.
