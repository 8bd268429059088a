package agent_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/agent/approval"
	"github.com/calf-go/calf/broker/brokertest"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/tool"
)

// Answering a request again, once its call has run, is refused and
// publishes nothing: the answer reaches the broker once (and so the call's
// result and the next inference are not emitted again), and a stream that
// follows the run yields each event once.
func TestApprovalAnsweredAgainRepeatsNothing(t *testing.T) {
	e := newEnv(t, nil)
	var toolRuns, modelCalls atomic.Int64
	add := tool.Must(tool.New("add", "Add two integers.", func(_ context.Context, in addArgs) (int, error) {
		toolRuns.Add(1)
		return in.A + in.B, nil
	}))
	second := make(chan struct{})
	release := make(chan struct{})
	m := func(ctx context.Context, req *model.Request) (*model.Response, error) {
		modelCalls.Add(1)
		last := req.Messages[len(req.Messages)-1]
		if last.Role != model.RoleTool {
			return modeltest.ToolCalls(modeltest.Call("call_1", "add", `{"a":2,"b":3}`)), nil
		}
		// The run is past the call: the extra answers come now.
		close(second)
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return modeltest.Text("The result is " + last.Text()), nil
	}
	a := agent.Must(agent.New("calculator", modeltest.FunctionModel(m), &agent.Options{
		Tools: []tool.Tool{add}, Permissions: &agent.Permissions{Mode: agent.PermissionAcceptEdits},
	}))
	if err := a.Serve(t.Context(), e.rt, nil); err != nil {
		t.Fatal(err)
	}
	answers := make(chan error, 1)
	go func() {
		answers <- func() error {
			req := pending(t, e.rt, "once")
			if _, err := approval.Respond(t.Context(), e.rt.Store(), e.rt.Client(), req.ID, approval.Answer{Approve: true, Digest: req.Digest}); err != nil {
				return err
			}
			select {
			case <-second:
			case <-t.Context().Done():
				return t.Context().Err()
			}
			defer close(release)
			for i := range 2 {
				if _, err := approval.Respond(t.Context(), e.rt.Store(), e.rt.Client(), req.ID, approval.Answer{Approve: true, Digest: req.Digest}); !errors.Is(err, approval.ErrAnswered) {
					return fmt.Errorf("answer %d again: %v, want approval.ErrAnswered", i+2, err)
				}
			}
			return nil
		}()
	}()
	seen := map[string]int{}
	var kinds []string
	for ev, err := range a.RunStream(runCtx(t), e.rt, "add 2 and 3", &agent.RunOptions{RunID: "once"}) {
		if err != nil {
			t.Fatal(err)
		}
		seen[ev.Message.ID]++
		k := string(ev.Kind)
		if ev.Kind == agent.EventApproval {
			k += ":" + string(ev.Approval.Status)
		}
		kinds = append(kinds, k)
	}
	if err := <-answers; err != nil {
		t.Fatal(err)
	}
	for id, n := range seen {
		if n > 1 {
			t.Errorf("the stream yielded %s %d times", id, n)
		}
	}
	got := strings.Join(kinds, " ")
	for _, k := range []string{"approval:approved", "tool_result"} {
		if n := strings.Count(got, k); n != 1 {
			t.Errorf("the stream yielded %d %s events: %s", n, k, got)
		}
	}
	e.settle(t)
	if ids, total := e.eventIDs("calf.agent.*.approval"); total != len(ids) {
		t.Errorf("%d approval messages on the broker for %d events %v: the answer was published again", total, len(ids), ids)
	}
	if toolRuns.Load() != 1 || modelCalls.Load() != 2 {
		t.Errorf("the tool ran %d times, the model was called %d times; want 1 and 2", toolRuns.Load(), modelCalls.Load())
	}
}

// A broker that delivers a message twice (at least once) does not make
// RunStream yield an event twice: it yields each message id once, the
// same events as without duplicates.
func TestRunStreamYieldsEachMessageOnce(t *testing.T) {
	stream := func(o *envOptions) string {
		e := newEnv(t, o)
		a, _, _ := newW1(t, e)
		seen := map[string]int{}
		var kinds []string
		for ev, err := range a.RunStream(runCtx(t), e.rt, "add 2 and 3", nil) {
			if err != nil {
				t.Fatal(err)
			}
			seen[ev.Message.ID]++
			kinds = append(kinds, string(ev.Kind))
		}
		for id, n := range seen {
			if n > 1 {
				t.Errorf("the stream yielded %s %d times", id, n)
			}
		}
		return strings.Join(kinds, " ")
	}
	want := stream(nil)
	if got := stream(&envOptions{wrap: func(b calf.Broker) calf.Broker { return brokertest.DuplicatePublishes(b, 2) }}); got != want {
		t.Errorf("stream with every message published twice: %s, want %s", got, want)
	}
}
