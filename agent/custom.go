package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent/internal/sessionstore"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/store"
)

// StepFunc is the step of a custom agent ([NewCustom]): plain Go code in
// place of a model call. in is the conversation the agent sees: the
// session's history (or the thread a handoff or [RunOptions.Thread] gave
// it) and this run's input, last; a copy, the step's to change. The step
// returns the run's output, or
// an error that fails the run (the run's error says what the step
// returned).
//
// A step may run more than once for one run: when its process stops
// before the run records what it returned, and when it races another run
// of the same session for the agent's state (see [StepContext.State]).
// What it changes of the state is applied once; the model and tool calls
// it makes through [StepContext.Generate] and [StepContext.CallTool] are
// made once (a step run again gets their recorded answers); other side
// effects should be idempotent, keyed by the run id.
type StepFunc[State, Out any] func(sc *StepContext[State], in []model.Message) (Out, error)

// StepContext is what a custom agent's step sees: the run (its
// [RunContext], with its deadline and cancellation), and the agent's
// typed state. Its methods Generate, CallTool and Approve call models,
// run tools and ask a person, each call recorded so that a step run again
// is not made to call again; a step makes them one at a time, in the same
// order each time it runs.
type StepContext[State any] struct {
	RunContext
	// State is the agent's state in the run's session, as the session's
	// earlier runs left it (the zero State for the first). The step reads
	// and changes it in place; what it holds when the step returns
	// without error is saved with the step's output, in one write. A run
	// outside a session starts from the zero State.
	State *State
	// calls counts the step's model and tool calls and approvals.
	calls *stepCalls
}

// CustomOptions configures a custom agent ([NewCustom]). A nil
// *CustomOptions means the defaults.
type CustomOptions struct {
	// Description says what the agent does, for people and for the
	// agents and teams that call it.
	Description string
	// Timeout bounds a whole run, as seen by Run and RunStream. Default:
	// DefaultTimeout.
	Timeout time.Duration
	// StartTimeout: see [Options.StartTimeout].
	StartTimeout time.Duration
	// StepTimeout bounds one call of the step. Default: 2 minutes, as
	// [Options.ModelTimeout].
	StepTimeout time.Duration
	// Hooks see the run's prompt, start, end and stop, as a model agent's
	// do; the tools a step runs with [StepContext.CallTool] go through no
	// hooks; see [Hook].
	Hooks []Hook
	// Flow holds the agent's runs to limits per key: see
	// [Options.Flow].
	Flow *FlowControl
}

// Custom is an agent whose step is Go code ([StepFunc]) instead of a model
// call. It embeds the [Agent] it is, so it runs, streams and serves like
// any agent, and c.Agent goes wherever an agent does: a team member
// (team.AgentMember), a workflow node (workflow.AgentNode), the target of
// a handoff ([HandoffTo]), a subagent ([Agent.AsTool]). Its runs are
// events on the same channels as a model agent's: an input, one
// inference (the step), and an output.
//
// Its typed State is kept in the state store per session; [Custom.State],
// [Custom.SetState] read and replace it (the zero State clears it)
// from any process.
type Custom[State, Out any] struct {
	*Agent[Out]
}

// kindAgentState is the store kind of custom agents' state: one record per
// agent and session (or run, outside a session).
const kindAgentState = "agent_state"

// NewCustom returns a custom agent named name whose step is step. Name it
// as [New] does. State is the type of the state it keeps between the runs
// of a session (struct{} for none); it must encode to JSON. Out is its
// output type, as for a model agent.
func NewCustom[State, Out any](name string, step StepFunc[State, Out], opts *CustomOptions) (*Custom[State, Out], error) {
	if step == nil {
		return nil, fmt.Errorf("%w: custom agent %s has no step", ErrInvalidAgent, name)
	}
	var o CustomOptions
	if opts != nil {
		o = *opts
	}
	a, err := NewTyped[Out](name, nil, &Options{
		Description:  o.Description,
		Timeout:      o.Timeout,
		StartTimeout: o.StartTimeout,
		ModelTimeout: o.StepTimeout,
		Hooks:        o.Hooks,
		Flow:         o.Flow,
		MaxTurns:     1,
		MaxRepairs:   -1,
	})
	if err != nil {
		return nil, err
	}
	if reflect.TypeFor[State]().Size() != 0 {
		var zero State
		if _, err := json.Marshal(zero); err != nil {
			return nil, fmt.Errorf("%w: custom agent %s: its state does not encode to JSON: %v", ErrInvalidAgent, name, err)
		}
	}
	c := &Custom[State, Out]{Agent: a}
	a.step = c.runStep(step)
	return c, nil
}

// stepCall is one call of a custom agent's step, as the inference handler
// makes it.
type stepCall struct {
	rc       RunContext
	messages []model.Message
	// scope is the id of the agent's state record; key names the run's
	// step, so that a step applied once is not applied again.
	scope, key string
	// calls is what the step's last run did with its calls.
	calls *stepCalls
}

// stepReply is what a step returned: the output as the run records it,
// and the text of the assistant message that carries it.
type stepReply struct {
	Output json.RawMessage `json:"output"`
	Text   string          `json:"text"`
}

// stateRecord is a custom agent's state in the store, with the step that
// last wrote it and what that step returned.
type stateRecord struct {
	State   json.RawMessage `json:"state,omitempty"`
	Applied string          `json:"applied,omitempty"`
	Reply   *stepReply      `json:"reply,omitempty"`
}

// stepError is an error the step returned: it fails the run.
type stepError struct{ err error }

func (e *stepError) Error() string { return "step failed: " + e.err.Error() }
func (e *stepError) Unwrap() error { return e.err }

// errApplied stops the store update of a step that was applied already.
var errApplied = errors.New("agent: step applied")

func (c *Custom[State, Out]) runStep(step StepFunc[State, Out]) func(call *stepCall) (*stepReply, error) {
	stateless := reflect.TypeFor[State]().Size() == 0
	return func(call *stepCall) (*stepReply, error) {
		run := func(s *State) (*stepReply, error) {
			rc := call.rc
			rc.seq = newSeq() // a step run again emits the same event ids
			calls := call.calls
			if calls == nil {
				calls = &stepCalls{}
			}
			*calls = stepCalls{correlationID: calls.correlationID, root: calls.root}
			out, err := step(&StepContext[State]{RunContext: rc, State: s, calls: calls}, call.messages)
			if calls.waiting {
				return nil, errAwait // even if the step went on without the answer
			}
			if err != nil {
				if cerr := call.rc.Err(); cerr != nil {
					return nil, cerr
				}
				return nil, &stepError{err}
			}
			raw, err := json.Marshal(out)
			if err != nil {
				return nil, &stepError{fmt.Errorf("its output does not encode to JSON: %v", err)}
			}
			r := &stepReply{Output: raw, Text: string(raw)}
			if t, ok := any(out).(string); ok {
				r.Text = t
			}
			return r, nil
		}
		if stateless {
			var s State
			return run(&s)
		}
		rt := call.rc.rt
		var reply *stepReply
		_, err := store.Update(call.rc, rt.store, kindAgentState, call.scope, func(data []byte, exists bool) ([]byte, error) {
			var rec stateRecord
			if exists {
				if err := json.Unmarshal(data, &rec); err != nil {
					return nil, fmt.Errorf("%w: agent %s: state %s: %v", ErrCorruptState, c.name, call.scope, err)
				}
				if rec.Applied == call.key && rec.Reply != nil {
					reply = rec.Reply
					return nil, errApplied
				}
			}
			var s State
			if len(rec.State) > 0 {
				if err := json.Unmarshal(rec.State, &s); err != nil {
					return nil, fmt.Errorf("%w: agent %s: state %s: %v", ErrCorruptState, c.name, call.scope, err)
				}
			}
			r, err := run(&s)
			if err != nil {
				return nil, err
			}
			raw, err := json.Marshal(s)
			if err != nil {
				return nil, &stepError{fmt.Errorf("its state does not encode to JSON: %v", err)}
			}
			reply = r
			return json.Marshal(stateRecord{State: raw, Applied: call.key, Reply: r})
		})
		if err != nil && !errors.Is(err, errApplied) {
			return nil, err
		}
		return reply, nil
	}
}

// stateScope is the id of an agent's state record in a session, or in a
// run outside a session. The session id goes first, with its length, so
// that a session's records list by prefix.
func stateScope(agent, session, run string) string {
	if session == "" {
		return "run:" + run + "/" + agent
	}
	return sessionStatePrefix(session) + agent
}

func sessionStatePrefix(session string) string {
	return sessionstore.AgentStatePrefix(session)
}

// State returns the agent's state in session (the zero State when it has
// none).
func (c *Custom[State, Out]) State(ctx context.Context, rt *Runtime, session string) (State, error) {
	var s State
	rec, err := c.stateRecord(ctx, rt, session)
	if err != nil || rec == nil || len(rec.State) == 0 {
		return s, err
	}
	if err := json.Unmarshal(rec.State, &s); err != nil {
		return s, fmt.Errorf("%w: agent %s: state of session %s: %v", ErrCorruptState, c.name, session, err)
	}
	return s, nil
}

func (c *Custom[State, Out]) stateRecord(ctx context.Context, rt *Runtime, session string) (*stateRecord, error) {
	if err := checkSession(session); err != nil {
		return nil, err
	}
	if rt == nil {
		return nil, fmt.Errorf("agent %s: read state of session %s: %w", c.name, session, ErrNoRuntime)
	}
	r, err := rt.store.Get(ctx, kindAgentState, stateScope(c.name, session, ""))
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("agent %s: read state of session %s: %w", c.name, session, err)
	}
	var rec stateRecord
	if err := json.Unmarshal(r.Data, &rec); err != nil {
		return nil, fmt.Errorf("%w: agent %s: state of session %s: %v", ErrCorruptState, c.name, session, err)
	}
	return &rec, nil
}

// SetState replaces the agent's state in session with s: the session's
// next run starts from it. A stored record that does not decode is left
// unchanged and is an error matching [ErrCorruptState].
func (c *Custom[State, Out]) SetState(ctx context.Context, rt *Runtime, session string, s State) error {
	if err := checkSession(session); err != nil {
		return err
	}
	if rt == nil {
		return fmt.Errorf("agent %s: set state of session %s: %w", c.name, session, ErrNoRuntime)
	}
	raw, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("agent %s: encode state: %w", c.name, err)
	}
	_, err = store.Update(ctx, rt.store, kindAgentState, stateScope(c.name, session, ""), func(data []byte, exists bool) ([]byte, error) {
		var rec stateRecord
		if exists {
			// Keep the last step's record: a redelivered step must not
			// run again over the new state. A record that does not decode
			// is left as it is: replacing it would lose that record.
			if err := json.Unmarshal(data, &rec); err != nil {
				return nil, fmt.Errorf("%w: %v", ErrCorruptState, err)
			}
		}
		rec.State = raw
		return json.Marshal(rec)
	})
	if err != nil {
		return fmt.Errorf("agent %s: set state of session %s: %w", c.name, session, err)
	}
	return nil
}

func checkSession(session string) error {
	if session == "" {
		return errors.New("agent: a session id is required")
	}
	return nil
}

// CustomEvent is the payload of an agent's custom channel
// (calf.agent.{name}.custom): an event that a custom agent's step or a
// tool emitted ([RunContext.EmitEvent]). Its message id is
// "{run}.custom.{step}.{n}" from a step and
// "{run}.custom.{step}.{call}.{n}" from a tool call, n counting the
// events of that step or call from 1, so that a step or call run again
// emits the same ids.
type CustomEvent struct {
	Step       int    `json:"step"`
	ToolCallID string `json:"tool_call_id,omitempty"`
	// Type is the emitter's name for the event.
	Type string          `json:"type"`
	Data json.RawMessage `json:"data,omitempty"`
}

// customChannel returns the channel of an agent's custom events.
func customChannel(agent string) string { return channelPrefix + agent + "." + suffixCustom }

const suffixCustom = "custom"

// EmitEvent publishes an event of type typ with data (encoded as JSON) on
// the agent's custom channel, where [Agent.RunStream] yields it (kind
// custom, in order with the step or tool call that emitted it). It is
// meant for a custom agent's step and for tools; its id is deterministic,
// so a step or call that runs again emits no duplicates on a broker that
// drops repeated ids, and an observer can drop them by id on others.
func (rc RunContext) EmitEvent(typ string, data any) error {
	if rc.rt == nil || rc.seq == nil {
		return errors.New("agent: EmitEvent outside a run's step or tool call")
	}
	raw, err := json.Marshal(data)
	if err != nil {
		return fmt.Errorf("agent: encode event %s: %w", typ, err)
	}
	n := strconv.FormatInt(rc.seq.Add(1), 10)
	id := rc.RunID + "." + suffixCustom + "." + strconv.Itoa(rc.Step)
	if rc.ToolCallID != "" {
		id += "." + rc.ToolCallID
	}
	ev := CustomEvent{Step: rc.Step, ToolCallID: rc.ToolCallID, Type: typ, Data: raw}
	_, err = rc.rt.client.Emit(rc.Context, customChannel(rc.Agent), ev, calf.WithID(id+"."+n), calf.WithKey(rc.RunID))
	return err
}

// newSeq returns a fresh event counter for a RunContext.
func newSeq() *atomic.Int64 { return new(atomic.Int64) }

// customStage is a custom agent's inference stage: its step stands in
// for the model call, and the handling ends with it.
func (h *handlers) customStage(ctx context.Context, inf *inference) (bool, error) {
	return true, h.customStep(ctx, inf.st, inf.version, inf.rc)
}

// customStep carries out the inference step of a custom agent's run: it
// calls the step, and records its output as the run's.
func (h *handlers) customStep(ctx context.Context, st *runState, version int64, rc RunContext) error {
	timeout := h.within(st, h.a.opts.ModelTimeout)
	sctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	rc.Context = sctx
	calls := &stepCalls{correlationID: st.correlationID(), root: st.Root}
	reply, err := h.a.step(&stepCall{
		rc:       rc,
		messages: model.CloneMessages(st.View()), // the step's to change
		scope:    stateScope(h.a.name, st.SessionID, st.RunID),
		key:      st.RunID + "." + strconv.Itoa(st.Step),
		calls:    calls,
	})
	var se *stepError
	switch {
	case err == nil:
	case errors.Is(err, errAwait):
		// The answer (a signal, a person's, the end of a sleep) runs the
		// step again, reading the run from the store: until then its
		// cached state would only hold room the runs in progress need.
		h.rt.runs.Forget(st.RunID)
		return nil

	case ctx.Err() != nil:
		return ctx.Err() // shutting down: leave the message for redelivery
	case sctx.Err() != nil:
		return h.fail(ctx, st.RunID, fmt.Sprintf("step timed out after %s", timeout))
	case errors.As(err, &se), errors.Is(err, ErrCorruptState):
		return h.fail(ctx, st.RunID, err.Error())
	default:
		return err // the store: try again on redelivery
	}
	step := st.Step
	st, err = h.rt.runs.UpdateFrom(ctx, st, version, func(cur *runState) (bool, error) {
		if cur.Status.Terminal() || cur.Step != step || cur.Phase != phaseInference {
			return false, nil // cancelled, or recorded by another delivery
		}
		cur.Usage, cur.Cost = cur.Usage.Add(calls.usage), cur.Cost.Add(calls.cost)
		cur.Messages = append(cur.Messages, model.AssistantMessage(reply.Text))
		cur.Deltas, cur.AdvancedBy = 0, ""
		cur.Status, cur.Output, cur.EndedAt = RunComplete, reply.Output, h.rt.now()
		return true, nil
	})
	if err != nil {
		return err
	}
	return h.next(ctx, st)
}
