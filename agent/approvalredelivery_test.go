package agent_test

import (
	"context"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/agent/approval"
	"github.com/calf-go/calf/broker/brokertest"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/internal/testwait"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/store/sqlite"
	"github.com/calf-go/calf/tool"
)

// The message of a tool call that waited for approval, delivered again
// after the approval was answered (as when the worker that asked was killed
// before its acknowledgement reached the broker), does not run the tool a
// second time beside the answer's run of it.
func TestToolCallRedeliveredAfterApproval(t *testing.T) {
	returned := make(chan struct{})
	e := newEnv(t, &envOptions{wrap: func(b calf.Broker) calf.Broker {
		return brokertest.Handled(b, func(m *calf.Message, _ error) {
			if m.ID == "tool-call-again" {
				close(returned)
			}
		})
	}})
	var runs atomic.Int64
	started, gate := make(chan struct{}, 2), make(chan struct{})
	add := tool.Must(tool.New("add", "Add two integers.", func(_ context.Context, in addArgs) (int, error) {
		runs.Add(1)
		started <- struct{}{}
		<-gate
		return in.A + in.B, nil
	}))
	m := modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
		if last := req.Messages[len(req.Messages)-1]; last.Role == model.RoleTool {
			return modeltest.Text("The result is " + last.Text()), nil
		}
		return modeltest.ToolCalls(modeltest.Call("call_1", "add", `{"a":2,"b":3}`)), nil
	})
	a := agent.Must(agent.New("calculator", m, &agent.Options{
		Tools: []tool.Tool{add}, Permissions: &agent.Permissions{Mode: agent.PermissionAsk},
	}))
	if err := a.Serve(t.Context(), e.rt, nil); err != nil {
		t.Fatal(err)
	}
	done := make(chan runResult, 1)
	go func() {
		out, err := a.Run(runCtx(t), e.rt, "add 2 and 3", &agent.RunOptions{RunID: "r1"})
		done <- runResult{out, err}
	}()
	req := pending(t, e.rt, "r1")
	if _, err := approval.Respond(t.Context(), e.rt.Store(), e.rt.Client(), req.ID, approval.Answer{Approve: true, Digest: req.Digest}); err != nil {
		t.Fatal(err)
	}
	<-started // the answer runs the call
	var call *calf.Message
	e.mu.Lock()
	for _, m := range e.events {
		if strings.Contains(m.Channel, ".tool_call.") {
			call = m.Clone()
		}
	}
	e.mu.Unlock()
	if call == nil {
		t.Fatal("no tool call was published")
	}
	call.ID = "tool-call-again"
	if err := e.broker.Publish(t.Context(), call); err != nil {
		t.Fatal(err)
	}
	select {
	case <-returned: // handled while the tool runs
	case <-started:
		t.Error("the tool call's message ran the approved tool a second time")
	case <-time.After(10 * time.Second):
		t.Fatal("the tool call's message was not handled")
	}
	close(gate)
	r := wait(t, done)
	if r.err != nil || r.out.Output != "The result is 5" {
		t.Fatalf("Run = %+v, %v", r.out, r.err)
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("the approved tool ran %d times, want 1", n)
	}
}

// An approval answered while the process that asked is gone (the answer
// recorded, its message lost with an in-memory broker) is carried out
// after a restart: Recover publishes the call again, and the call, finding
// the answer, publishes the answer again, which runs the tool once.
func TestApprovalAnsweredWhileDownIsRecovered(t *testing.T) {
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "calf.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	b1 := memory.New(nil)
	c1 := calf.NewClient(b1, nil)
	rt1 := agent.NewRuntime(c1, st, nil)
	perms := agent.Permissions{Mode: agent.PermissionAsk}
	a1, runs1, _ := approvalAgent(t, nil, rt1, perms, "add")
	if _, err := a1.Submit(t.Context(), rt1, "add 2 and 3", &agent.RunOptions{RunID: "r1"}); err != nil {
		t.Fatal(err)
	}
	req := pending(t, rt1, "r1")
	_ = c1.Close()
	_ = b1.Close()
	if _, err := approval.Respond(t.Context(), rt1.Store(), rt1.Client(), req.ID, approval.Answer{Approve: true, Digest: req.Digest}); err == nil {
		t.Fatal("the answer was published on a closed broker")
	}

	b2 := memory.New(nil)
	t.Cleanup(func() { _ = b2.Close() })
	c2 := calf.NewClient(b2, nil)
	t.Cleanup(func() { _ = c2.Close() })
	rt2 := agent.NewRuntime(c2, st, nil)
	a2, runs2, _ := approvalAgent(t, nil, rt2, perms, "add")
	if n, err := a2.Recover(t.Context(), rt2, nil); err != nil || n != 1 {
		t.Fatalf("Recover = %d, %v", n, err)
	}
	var out *agent.Output[string]
	testwait.ForErr(t, 10*time.Second, "the result of r1", func() (err error) {
		out, err = a2.Wait(runCtx(t), rt2, "r1")
		return err
	})
	if out.Output != "The result is 5" {
		t.Fatalf("Result = %+v", out)
	}
	if n := runs1.Load() + runs2.Load(); n != 1 {
		t.Errorf("the approved tool ran %d times, want 1", n)
	}
}
