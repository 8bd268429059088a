package agent

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"

	"github.com/calf-go/calf/agent/approval"
	"github.com/calf-go/calf/agent/internal/engine"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/tool"
)

// A custom agent's step may call models ([StepContext.Generate]), run
// tools ([StepContext.CallTool]) and ask a person ([StepContext.Approve]).
// Each such call has a number in its step, from 1, in the order the step
// makes them, and what it returned is recorded (kind custom_call, id
// "{run}/{step}/{n}"; an approval is its own record), so that the step,
// run again after a crash, a redelivery or an approval's answer, gets the
// recorded answers instead of calling again. A step must make its calls
// in the same order each time it runs, and one at a time (not from
// goroutines of its own).

// The custom event types of a step's calls (see [CustomEvent]).
const (
	eventModelResponse = "model_response"
	eventToolCall      = "tool_call"
	eventToolResult    = "tool_result"
)

// errAwait ends a step that asked a person and has no answer yet, or
// that sleeps ([StepContext.Sleep]): the run waits, and the answer (the
// timer) runs the step again.
var errAwait = errors.New("agent: the step waits")

// stepCalls is what one run of a step did with its calls: how many it
// made, what the model calls used and cost, and whether it waits for an
// approval. The engine reads it when the step returns.
type stepCalls struct {
	n       int
	usage   model.Usage
	cost    model.Cost
	waiting bool
	// Of the run, for approval requests.
	correlationID string
	root          *approval.Root
}

// modelResponseData is the data of a model_response event.
type modelResponseData struct {
	Call    int           `json:"call"`
	Model   string        `json:"model,omitempty"`
	Message model.Message `json:"message"`
	Usage   model.Usage   `json:"usage"`
}

// toolEventData is the data of a tool_call and a tool_result event.
type toolEventData struct {
	Call       int             `json:"call"`
	ToolCallID string          `json:"tool_call_id"`
	Name       string          `json:"name"`
	Arguments  json.RawMessage `json:"arguments,omitempty"`
	Result     *tool.Result    `json:"result,omitempty"`
	Error      string          `json:"error,omitempty"`
}

// next numbers the step's next call, and returns its record's id and its
// call id.
func (c *stepCalls) next(rc RunContext) (n int, key, callID string) {
	c.n++
	key, callID = engine.StepCall(rc.RunID, rc.Step, c.n)
	return c.n, key, callID
}

// Generate calls the model m with req under the step's context, as the
// step's next call. The response's usage and cost (by the runtime's
// prices) count in the run's, when the step returns; the response is
// published as a custom event of type "model_response" (data: call, the
// call's number in the step; model; message; usage), and recorded, so
// that the step run again gets it without calling the model again. A
// failed call is not recorded: it is made again when the step runs again.
func (sc *StepContext[State]) Generate(m model.Model, req *model.Request) (*model.Response, error) {
	rc, c := sc.RunContext, sc.calls
	if c == nil || rc.rt == nil {
		return nil, errors.New("agent: Generate outside a custom agent's step")
	}
	n, key, _ := c.next(rc)
	rec, ok, err := engine.RecordedCall(rc, rc.rt.store, key, "model")
	if err != nil {
		return nil, err
	}
	if !ok {
		resp, err := m.Generate(rc, req)
		if err != nil {
			return nil, err
		}
		if resp == nil {
			return nil, fmt.Errorf("agent: model %s returned no response", m.Name())
		}
		if rec, err = engine.RecordCall(rc, rc.rt.store, key, &engine.CallRecord{Kind: "model", Response: resp}); err != nil {
			return nil, err
		}
	}
	resp := rec.Response
	u := resp.Usage
	if u.Requests == 0 {
		u.Requests = 1
	}
	name := cmp.Or(resp.Model, m.Name())
	c.usage = c.usage.Add(u)
	c.cost = c.cost.Add(rc.rt.prices.CostOf(name, u))
	msg := resp.Message
	msg.Role = model.RoleAssistant
	if err := rc.EmitEvent(eventModelResponse, modelResponseData{Call: n, Model: name, Message: msg, Usage: resp.Usage}); err != nil {
		return nil, err
	}
	return resp, nil
}

// CallTool runs the tool t with args as the step's next call, with the
// [RunContext] of the call (its ToolCallID is "custom-{step}-{n}", n the
// call's number in the step), so that tools reading the run's
// dependencies or emitting events work as in a model agent's run. It
// publishes custom events of types "tool_call" before (data: call,
// tool_call_id, name, arguments) and "tool_result" after (the same, with
// result or error), and records what the tool returned, its error
// included, so that the step run again gets it without running the tool
// again. A call cut short by the step's context is not recorded.
func (sc *StepContext[State]) CallTool(t tool.Tool, args json.RawMessage) (*tool.Result, error) {
	rc, c := sc.RunContext, sc.calls
	if c == nil || rc.rt == nil {
		return nil, errors.New("agent: CallTool outside a custom agent's step")
	}
	n, key, callID := c.next(rc)
	name := t.Definition().Name
	ev := toolEventData{Call: n, ToolCallID: callID, Name: name, Arguments: args}
	if err := rc.EmitEvent(eventToolCall, ev); err != nil {
		return nil, err
	}
	rec, ok, err := engine.RecordedCall(rc, rc.rt.store, key, "tool")
	if err != nil {
		return nil, err
	}
	if !ok {
		trc := rc
		trc.ToolCallID, trc.seq = callID, newSeq()
		ctx := context.WithValue(rc.Context, runContextKey{}, trc)
		res, err := callSafely(ctx, t, args)
		if err != nil && rc.Err() != nil {
			return nil, rc.Err()
		}
		r := &engine.CallRecord{Kind: "tool", Result: res}
		if err != nil {
			r.Result, r.Error = nil, err.Error()
		}
		if rec, err = engine.RecordCall(rc, rc.rt.store, key, r); err != nil {
			return nil, err
		}
	}
	ev.Arguments, ev.Result, ev.Error = nil, rec.Result, rec.Error
	if err := rc.EmitEvent(eventToolResult, ev); err != nil {
		return nil, err
	}
	if rec.Error != "" {
		return nil, errors.New(rec.Error)
	}
	if rec.Result == nil {
		return &tool.Result{}, nil
	}
	return rec.Result, nil
}

// callSafely calls t, turning a panic into an error.
func callSafely(ctx context.Context, t tool.Tool, args json.RawMessage) (res *tool.Result, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("tool %q panicked: %v\n%s", t.Definition().Name, v, debug.Stack())
		}
	}()
	return t.Call(ctx, args)
}

// Approve asks a person to approve action with args (a JSON value,
// shown to the approver) for reason, as the step's next call. The request
// is an [approval.Approval] (id [approval.ID] of the run and the call id
// "custom-{step}-{n}", ToolName action), stored and published on the
// agent's approval channel, so that [approval.List], calf approvals and
// the server show it, and [approval.Respond] answers it.
//
// With an answer recorded, Approve returns the request as answered:
// Status [approval.Approved] (with ApprovedArguments when the approver
// edited them) or [approval.Denied] (with the approver's Message); a
// request that expired is denied. Without one, Approve returns an error,
// which the step should return: the step ends without output, its state
// unchanged, and the run waits, holding no goroutine, until the answer
// runs the step again, where its earlier calls return what they
// returned, and Approve the answer. (A step that returns otherwise after
// an unanswered Approve waits all the same.) A request cancelled because
// its run ended returns an error matching [approval.ErrRunEnded].
func (sc *StepContext[State]) Approve(action string, args json.RawMessage, reason string) (*approval.Approval, error) {
	rc, c := sc.RunContext, sc.calls
	if c == nil || rc.rt == nil {
		return nil, errors.New("agent: Approve outside a custom agent's step")
	}
	if !json.Valid(args) {
		return nil, errors.New("agent: Approve: the arguments are not JSON")
	}
	_, _, callID := c.next(rc)
	id := approval.ID(rc.RunID, callID)
	a, err := approval.Get(rc, rc.rt.store, id)
	if errors.Is(err, approval.ErrNotFound) {
		a = &approval.Approval{
			ID: id, Agent: rc.Agent, RunID: rc.RunID, SessionID: rc.SessionID, CorrelationID: c.correlationID, Root: c.root,
			Step: rc.Step, ToolCallID: callID, ToolName: action,
			Arguments: args, Digest: approval.Digest(action, args), Reason: reason, Status: approval.Pending,
			RequestedAt: rc.rt.now(),
		}
		data, err := json.Marshal(a)
		if err != nil {
			return nil, err
		}
		if _, err := rc.rt.store.Put(rc, approval.Kind, id, data, 0); errors.Is(err, store.ErrConflict) {
			if a, err = approval.Get(rc, rc.rt.store, id); err != nil {
				return nil, err
			}
		} else if err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, err
	}
	switch a.Status {
	case approval.Pending:
		c.waiting = true
		if err := rc.rt.awaitAnswer(rc, a); err != nil {
			return nil, err
		}
		if err := approval.Publish(rc, rc.rt.client, a); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%w: request %s", errAwait, a.ID)
	case approval.Cancelled:
		return a, fmt.Errorf("%w: approval request %s: %s", approval.ErrRunEnded, a.ID, a.Message)
	}
	return a, nil
}
