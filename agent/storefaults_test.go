package agent_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/agent/session"
	"github.com/calf-go/calf/deadletter"
	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/store/storetest"
	"github.com/calf-go/calf/tool"
)

// faultEnv serves W1 on a runtime whose store injects faults. The caller
// runs through its own runtime on the same broker and the healthy store,
// as a caller in another process would, so that what is tested is the
// handlers' behaviour.
type faultEnv struct {
	*env
	faulty     *storetest.FaultyStore
	worker     *agent.Runtime
	agent      *agent.Agent[string]
	modelCalls *atomic.Int64
	toolCalls  *atomic.Int64
}

// storeFaultAttempts is the delivery budget of the handlers under faults:
// large enough that a run meets no budget at the tested rates.
const storeFaultAttempts = 60

func newFaultEnv(t *testing.T, f storetest.Faults, maxAttempts int) *faultEnv {
	t.Helper()
	return newFaultEnvOn(t, f, maxAttempts, nil)
}

// newFaultEnvOn is newFaultEnv on the memory broker wrapped by wrap (nil:
// as it is, local).
func newFaultEnvOn(t *testing.T, f storetest.Faults, maxAttempts int, wrap func(calf.Broker) calf.Broker) *faultEnv {
	t.Helper()
	return newFaultEnvWith(t, f, maxAttempts, &envOptions{wrap: wrap})
}

// newFaultEnvWith is newFaultEnv on the environment o describes.
func newFaultEnvWith(t *testing.T, f storetest.Faults, maxAttempts int, o *envOptions) *faultEnv {
	t.Helper()
	e := newEnv(t, o)
	fs := storetest.WithFaults(e.store, f)
	worker := agent.NewRuntime(e.client, fs, nil)
	var modelCalls atomic.Int64
	add, toolCalls := addTool(t)
	a, err := agent.New("calculator", w1Model(&modelCalls), &agent.Options{
		Instructions: "You add numbers with the add tool.",
		Tools:        []tool.Tool{add},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Serve(t.Context(), worker, &agent.ServeOptions{MaxAttempts: maxAttempts}); err != nil {
		t.Fatal(err)
	}
	return &faultEnv{env: e, faulty: fs, worker: worker, agent: a, modelCalls: &modelCalls, toolCalls: toolCalls}
}

// checkRuns checks the invariants after runs with the given ids ended
// with W1's answer: one tool execution and one recorded tool result per
// run (in the run's record, and in a record of its own where the broker
// is not local), and one output id and one reply id per run.
func (fe *faultEnv) checkRuns(t *testing.T, ids []string) {
	t.Helper()
	fe.settle(t)
	if n := fe.toolCalls.Load(); n != int64(len(ids)) {
		t.Errorf("the tool ran %d times for %d runs", n, len(ids))
	}
	if n := fe.modelCalls.Load(); n < 2*int64(len(ids)) {
		t.Errorf("the model was called %d times for %d runs", n, len(ids))
	}
	for _, id := range ids {
		st, err := fe.rt.LoadState(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if st.Status != agent.RunComplete || len(st.ToolCalls) != 1 || st.ToolCalls[0].Result.Text() != "5" || len(st.Pending) != 0 {
			t.Errorf("run %s: status %s, tool calls %+v, pending %+v", id, st.Status, st.ToolCalls, st.Pending)
		}
		if calf.IsLocal(fe.client.Broker()) {
			continue
		}
		if _, err := fe.store.Get(t.Context(), store.KindToolResult, id+"/call_1"); err != nil {
			t.Errorf("run %s: recorded tool result: %v", id, err)
		}
	}
	outputs, _ := fe.eventIDs(agent.OutputChannel("calculator"))
	replies, _ := fe.eventIDs(calf.InboxPrefix + ">")
	if len(outputs) != len(ids) || len(replies) != len(ids) {
		t.Errorf("%d output ids and %d reply ids for %d runs", len(outputs), len(replies), len(ids))
	}
	t.Logf("model calls %d; injected %+v", fe.modelCalls.Load(), fe.faulty.Stats())
}

// The fault chosen for one write of a W1 run is survived: the run ends
// with its answer, the tool runs once, and one output is published.
func TestRunSurvivesAFaultOnEachWrite(t *testing.T) {
	type write struct {
		name, kind string
		n          int64 // the n-th Put of kind
	}
	// The writes of a W1 run, in order: on a local broker the tool's
	// result goes into the run's record with the step's advance; on
	// another, the result has its own record, which the tool-result
	// handler then takes into the run.
	protocols := []struct {
		name   string
		wrap   func(calf.Broker) calf.Broker
		writes []write
	}{
		{"local", nil, []write{
			{"input creates the run", store.KindRun, 1},
			{"step 1 records the tool call", store.KindRun, 2},
			{"the tool result is recorded in the run and advances it", store.KindRun, 3},
			{"step 2 records the answer", store.KindRun, 4},
		}},
		{"not local", notLocal, []write{
			{"input creates the run", store.KindRun, 1},
			{"step 1 records the tool call", store.KindRun, 2},
			{"the tool result is recorded", store.KindToolResult, 1},
			{"the tool result advances the run", store.KindRun, 3},
			{"step 2 records the answer", store.KindRun, 4},
		}},
	}
	faults := []storetest.Fault{storetest.Fail, storetest.LostReply, storetest.Conflict, storetest.ConcurrentWrite}
	for _, proto := range protocols {
		for _, w := range proto.writes {
			for _, f := range faults {
				if f == storetest.Conflict && w.n == 1 {
					continue // a conflict on a create says the record exists: ConcurrentWrite covers that
				}
				t.Run(proto.name+"/"+w.name+"/"+f.String(), func(t *testing.T) {
					testFaultOnWrite(t, proto.wrap, w.kind, w.n, f)
				})
			}
		}
	}
}

// testFaultOnWrite runs W1 with the fault f on the n-th write of kind.
func testFaultOnWrite(t *testing.T, wrap func(calf.Broker) calf.Broker, kind string, n int64, f storetest.Fault) {
	var puts sync.Map // kind -> *atomic.Int64
	fe := newFaultEnvOn(t, storetest.Faults{Inject: func(c storetest.Call) storetest.Fault {
		if c.Op != storetest.OpPut {
			return storetest.NoFault
		}
		count, _ := puts.LoadOrStore(c.Kind, new(atomic.Int64))
		if count.(*atomic.Int64).Add(1) == n && c.Kind == kind {
			return f
		}
		return storetest.NoFault
	}}, storeFaultAttempts, wrap)
	out, err := fe.agent.Run(runCtx(t), fe.rt, "add 2 and 3", &agent.RunOptions{RunID: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	if out.Output != "The sum is 5" {
		t.Fatalf("output = %q", out.Output)
	}
	fe.checkRuns(t, []string{"r1"})
	if st := fe.faulty.Stats(); st == (storetest.FaultStats{}) {
		t.Error("no fault was injected")
	}
}

// Many concurrent runs on a store that fails, loses replies, conflicts
// and races other writers at random all end with their answer, each tool
// call executed once.
func TestConcurrentRunsUnderStoreFaults(t *testing.T) {
	tests := []struct {
		name string
		f    storetest.Faults
	}{
		{"write failures", storetest.Faults{Seed: 1, WriteFailRate: 0.2}},
		{"lost replies", storetest.Faults{Seed: 2, LostReplyRate: 0.2}},
		{"conflicts", storetest.Faults{Seed: 3, ConflictRate: 0.3}},
		{"concurrent writers", storetest.Faults{Seed: 4, ConcurrentWriteRate: 0.3}},
		{"read failures", storetest.Faults{Seed: 5, ReadFailRate: 0.2}},
		{"slow reads", storetest.Faults{Seed: 7, ReadDelay: time.Millisecond, ReadFailRate: 0.05}},
		{"everything", storetest.Faults{Seed: 6, WriteFailRate: 0.1, LostReplyRate: 0.1, ConflictRate: 0.1, ConcurrentWriteRate: 0.1, ReadFailRate: 0.1}},
	}
	const runs = 16
	for _, tt := range tests {
		for _, proto := range protocols {
			t.Run(proto.name+"/"+tt.name, func(t *testing.T) {
				testConcurrentRunsUnderStoreFaults(t, proto.wrap, tt.f, runs)
			})
		}
	}
}

// protocols are the two ways the handlers record a tool's result: in the
// run's record, on a local broker, or in a record of its own.
var protocols = []struct {
	name string
	wrap func(calf.Broker) calf.Broker
}{{"local", nil}, {"not local", notLocal}}

func testConcurrentRunsUnderStoreFaults(t *testing.T, wrap func(calf.Broker) calf.Broker, f storetest.Faults, runs int) {
	fe := newFaultEnvOn(t, f, storeFaultAttempts, wrap)
	ids := make([]string, runs)
	errs := make([]error, runs)
	var wg sync.WaitGroup
	for i := range runs {
		ids[i] = fmt.Sprintf("run-%02d", i)
		wg.Go(func() {
			out, err := fe.agent.Run(runCtx(t), fe.rt, "add 2 and 3", &agent.RunOptions{RunID: ids[i]})
			if err == nil && out.Output != "The sum is 5" {
				err = fmt.Errorf("output %q", out.Output)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	fe.checkRuns(t, ids)
}

// A tool result that cannot be recorded, whatever the retries, does not
// make the tool run once per delivery; once the retry budget is spent, the
// caller gets a clear error and the run waits for the dead letter's replay.
func TestUnrecordableToolResult(t *testing.T) {
	for _, proto := range protocols {
		t.Run(proto.name, func(t *testing.T) { testUnrecordableToolResult(t, proto.wrap) })
	}
}

func testUnrecordableToolResult(t *testing.T, wrap func(calf.Broker) calf.Broker) {
	const attempts = 4
	// The result's write: the run's third on a local broker, the result's
	// own record on another.
	var puts atomic.Int64
	fe := newFaultEnvOn(t, storetest.Faults{Inject: func(c storetest.Call) storetest.Fault {
		if c.Op != storetest.OpPut {
			return storetest.NoFault
		}
		if wrap == nil && c.Kind == store.KindRun && puts.Add(1) >= 3 || wrap != nil && c.Kind == store.KindToolResult {
			return storetest.Fail
		}
		return storetest.NoFault
	}}, attempts, wrap)
	dead := make(chan calf.DeadLetter, 1)
	if err := fe.client.Handle(t.Context(), calf.DeadLetterChannel, func(_ context.Context, m *calf.Message) error {
		var dl calf.DeadLetter
		if err := m.Decode(&dl); err != nil {
			return calf.Permanent(err)
		}
		dead <- dl
		return nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	_, err := fe.agent.Run(runCtx(t), fe.rt, "add 2 and 3", &agent.RunOptions{RunID: "r1"})
	if !errors.Is(err, agent.ErrRunParked) {
		t.Fatalf("err = %v, want ErrRunParked", err)
	}
	dl := <-dead
	if dl.Attempts != attempts || !strings.Contains(dl.Error, storetest.ErrInjected.Error()) || !strings.Contains(dl.Message.Channel, ".tool_call.add") {
		t.Errorf("dead letter = %+v", dl)
	}
	fe.settle(t)
	if n := fe.toolCalls.Load(); n != 1 {
		t.Errorf("the tool ran %d times in %d deliveries, want once", n, attempts)
	}
	st, err := fe.rt.LoadState(t.Context(), "r1")
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != agent.RunRunning {
		t.Errorf("run status %s, want running: it waits for the replay", st.Status)
	}
}

// Runs that continue one session on a faulty store each append their
// messages to it exactly once, in order, and each sees the history of the
// runs before it.
func TestSessionUnderStoreFaults(t *testing.T) {
	fe := newFaultEnv(t, storetest.Faults{Seed: 11, WriteFailRate: 0.15, LostReplyRate: 0.15, ConcurrentWriteRate: 0.15, ReadFailRate: 0.1}, storeFaultAttempts)
	const runs = 5
	var ids []string
	for i := range runs {
		id := fmt.Sprintf("run-%d", i)
		ids = append(ids, id)
		out, err := fe.agent.Run(runCtx(t), fe.rt, fmt.Sprintf("add 2 and 3, turn %d", i), &agent.RunOptions{RunID: id, SessionID: "s1"})
		if err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		if out.Output != "The sum is 5" {
			t.Fatalf("run %d: output %q", i, out.Output)
		}
		st, err := fe.rt.LoadState(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if st.HistoryLen != 4*i {
			t.Errorf("run %d saw %d messages of history, want %d", i, st.HistoryLen, 4*i)
		}
	}
	fe.checkRuns(t, ids)
	s, err := session.Load(t.Context(), fe.rt.Store(), "s1")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(s.Runs, ids) || len(s.Messages) != 4*runs {
		t.Fatalf("session runs %v with %d messages, want %v with %d", s.Runs, len(s.Messages), ids, 4*runs)
	}
	for i := range runs {
		if got, want := s.Messages[4*i].Text(), fmt.Sprintf("add 2 and 3, turn %d", i); got != want {
			t.Errorf("message %d of the session is %q, want %q", 4*i, got, want)
		}
	}
}

// A run whose message is parked while the store is down is not lost: the
// dead letter is recorded, and once the store is back, replaying it
// completes the run, without executing its tool call again.
func TestStoreOutageParksThenReplayCompletes(t *testing.T) {
	tests := []struct {
		name, kind string
		wrap       func(calf.Broker) calf.Broker
		channel    string // where the parked message was
	}{
		// On a local broker, the run's third write records the tool's result.
		{"local/tool result not recorded", store.KindRun, nil, agent.ToolCallChannel("calculator", "add")},
		{"not local/tool result not recorded", store.KindToolResult, notLocal, agent.ToolCallChannel("calculator", "add")},
		{"not local/run not advanced", store.KindRun, notLocal, agent.ToolResultChannel("calculator")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var down atomic.Bool
			var puts atomic.Int64
			fe := newFaultEnvOn(t, storetest.Faults{Inject: func(c storetest.Call) storetest.Fault {
				if c.Op != storetest.OpPut || c.Kind != tt.kind {
					return storetest.NoFault
				}
				// The store goes down for good at the write of the tool's
				// result, or at the run's third write: after the tool ran.
				if n := puts.Add(1); tt.kind == store.KindToolResult || n == 3 {
					down.Store(true)
				}
				if down.Load() {
					return storetest.Fail
				}
				return storetest.NoFault
			}}, 3, tt.wrap)
			if err := deadletter.Serve(t.Context(), fe.client, fe.store); err != nil {
				t.Fatal(err)
			}
			opts := &agent.RunOptions{RunID: "r1", ReplyTo: &agent.ReplyTo{Channel: fe.client.Inbox(), Key: "r1"}}
			if _, err := fe.agent.Submit(t.Context(), fe.rt, "add 2 and 3", opts); err != nil {
				t.Fatal(err)
			}
			fe.settle(t)
			recs, err := deadletter.List(t.Context(), fe.store)
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) != 1 || recs[0].Message.Channel != tt.channel || !strings.Contains(recs[0].Error, storetest.ErrInjected.Error()) {
				t.Fatalf("dead letters: %+v", recs)
			}
			if st, err := fe.rt.LoadState(t.Context(), "r1"); err != nil || st.Status != agent.RunRunning {
				t.Fatalf("run during the outage: %+v, %v", st, err)
			}
			down.Store(false)
			fe.faulty.SetEnabled(false)
			if _, published, err := deadletter.Replay(t.Context(), fe.broker, fe.store, recs[0].ID, time.Now()); err != nil || !published {
				t.Fatalf("replay: published %v, %v", published, err)
			}
			fe.settle(t)
			out, err := fe.agent.Wait(t.Context(), fe.rt, "r1")
			if err != nil {
				t.Fatal(err)
			}
			if out.Output != "The sum is 5" {
				t.Errorf("output = %q", out.Output)
			}
			fe.checkRuns(t, []string{"r1"})
		})
	}
}

// A caller waiting on a run whose message gets parked hears of it at once,
// rather than at its timeout; the run stays as it is, and replaying the
// dead letter completes it.
func TestRunReportsAParkedMessage(t *testing.T) {
	for _, proto := range protocols {
		t.Run(proto.name, func(t *testing.T) { testRunReportsAParkedMessage(t, proto.wrap) })
	}
}

func testRunReportsAParkedMessage(t *testing.T, wrap func(calf.Broker) calf.Broker) {
	// The run's third write is the tool's result on a local broker (the
	// tool call's message is parked), the result's advance on another
	// (the tool result's message).
	parked := agent.ToolCallChannel("calculator", "add")
	if wrap != nil {
		parked = agent.ToolResultChannel("calculator")
	}
	var down atomic.Bool
	var puts atomic.Int64
	fe := newFaultEnvOn(t, storetest.Faults{Inject: func(c storetest.Call) storetest.Fault {
		if c.Op != storetest.OpPut || c.Kind != store.KindRun {
			return storetest.NoFault
		}
		// The store goes down at the run's third write: after the tool ran.
		if puts.Add(1) == 3 {
			down.Store(true)
		}
		if down.Load() {
			return storetest.Fail
		}
		return storetest.NoFault
	}}, 3, wrap)
	if err := deadletter.Serve(t.Context(), fe.client, fe.store); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	out, err := fe.agent.Run(ctx, fe.rt, "add 2 and 3", &agent.RunOptions{RunID: "r1"})
	var re *agent.RunError
	if !errors.Is(err, agent.ErrRunParked) || !errors.As(err, &re) || errors.Is(err, agent.ErrRunCancelled) || errors.Is(err, agent.ErrRunFailed) {
		t.Fatalf("Run = %v, %v; want a *RunError matching ErrRunParked only", out, err)
	}
	if re.RunID != "r1" || re.Status != agent.RunRunning || re.Parked == nil || re.Parked.Message.Channel != parked ||
		re.Parked.Attempts != 3 || !strings.Contains(re.Reason, storetest.ErrInjected.Error()) {
		t.Errorf("RunError = %+v, parked %+v", re, re.Parked)
	}
	if ctx.Err() != nil {
		t.Fatal("Run returned only at its deadline")
	}
	fe.settle(t)
	if st, err := fe.rt.LoadState(t.Context(), "r1"); err != nil || st.Status != agent.RunRunning {
		t.Fatalf("run after the caller's error: %+v, %v", st, err)
	}
	down.Store(false)
	fe.faulty.SetEnabled(false)
	recs, err := deadletter.List(t.Context(), fe.store)
	if err != nil || len(recs) != 1 {
		t.Fatalf("dead letters: %+v, %v", recs, err)
	}
	if _, published, err := deadletter.Replay(t.Context(), fe.broker, fe.store, recs[0].ID, time.Now()); err != nil || !published {
		t.Fatalf("replay: published %v, %v", published, err)
	}
	fe.settle(t)
	res, err := fe.agent.Wait(t.Context(), fe.rt, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if res.Output != "The sum is 5" {
		t.Errorf("output after the replay = %q", res.Output)
	}
	fe.checkRuns(t, []string{"r1"})
}

// RunStream ends with the same error as Run when a message of the run is
// parked.
func TestRunStreamReportsAParkedMessage(t *testing.T) {
	for _, proto := range protocols {
		t.Run(proto.name, func(t *testing.T) { testRunStreamReportsAParkedMessage(t, proto.wrap) })
	}
}

func testRunStreamReportsAParkedMessage(t *testing.T, wrap func(calf.Broker) calf.Broker) {
	var puts atomic.Int64
	fe := newFaultEnvOn(t, storetest.Faults{Inject: func(c storetest.Call) storetest.Fault {
		if c.Op == storetest.OpPut && c.Kind == store.KindRun && puts.Add(1) >= 3 {
			return storetest.Fail
		}
		return storetest.NoFault
	}}, 2, wrap)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var last error
	var kinds []agent.EventKind
	for ev, err := range fe.agent.RunStream(ctx, fe.rt, "add 2 and 3", &agent.RunOptions{RunID: "r1"}) {
		if err != nil {
			last = err
			continue
		}
		kinds = append(kinds, ev.Kind)
	}
	var re *agent.RunError
	if !errors.Is(last, agent.ErrRunParked) || !errors.As(last, &re) || re.Parked.Attempts != 2 {
		t.Fatalf("RunStream ended with %v (events %v); want a *RunError matching ErrRunParked after 2 attempts", last, kinds)
	}
	// The run's third write records the tool's result on a local broker:
	// the result, unrecorded, is not published. On another broker the
	// result has its own record, and the third write is the advance.
	if wrap == nil && (!slices.Contains(kinds, agent.EventToolCall) || slices.Contains(kinds, agent.EventToolResult) || slices.Contains(kinds, agent.EventOutput)) {
		t.Errorf("events %v: want the tool call, no result and no output", kinds)
	}
	if wrap != nil && (!slices.Contains(kinds, agent.EventToolResult) || slices.Contains(kinds, agent.EventOutput)) {
		t.Errorf("events %v: want the tool result and no output", kinds)
	}
	if ctx.Err() != nil {
		t.Fatal("RunStream ended only at its deadline")
	}
}
