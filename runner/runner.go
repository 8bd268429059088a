package runner

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/team"
	"github.com/calf-go/calf/workflow"
)

// Runner is an agent, a team or a workflow as a protocol edge runs it.
// [Agent], [Team] and [Workflow] make one.
type Runner interface {
	// Name and Description say what the runner is, to clients.
	Name() string
	Description() string
	// Run starts a run with prompt, calls progress (when not nil) for its
	// events as they happen, and returns how it ended. A run that fails
	// or is cancelled is a Result with that status; the error is for a
	// run that could not be started or followed, and ctx's error when
	// ctx ends first (the run is then cancelled).
	Run(ctx context.Context, rt *agent.Runtime, prompt string, opts *Options, progress func(Progress)) (*Result, error)
	// Status reads the run runID from the store without waiting: its
	// status, and its output once it has ended. An unknown run is an
	// error matching store.ErrNotFound.
	Status(ctx context.Context, rt *agent.Runtime, runID string) (*Result, error)
	// Cancel cancels the run runID, for reason, unless it has ended.
	Cancel(ctx context.Context, rt *agent.Runtime, runID, reason string) error
	// Pause asks the run runID to stop before its next step, for reason:
	// the step in progress finishes, and the run then waits, holding
	// nothing but its stored state, until Resume. Resume lets a paused run
	// go on. Both do what the agent's, team's or workflow's own Pause and
	// Resume do: pausing a paused run, or resuming one that is not, changes
	// nothing; a run that has ended is an error matching
	// agent.ErrRunEnded.
	Pause(ctx context.Context, rt *agent.Runtime, runID, reason string) error
	Resume(ctx context.Context, rt *agent.Runtime, runID string) error
	// A nil rt is an error matching agent.ErrNoRuntime in every method.
	// On a runtime that serves on demand
	// (agent.RuntimeOptions.ServeOnDemand), Run serves the agent, team or
	// workflow there first.
}

// Submitter is a Runner that can start a run without waiting for it, for
// edges whose runs outlive a request (a run that waits for an approval
// ends the request; its answer comes in another). [Agent]'s, [Team]'s and
// [Workflow]'s runners are Submitters: an agent's runs and a team's
// member agents' runs stream their text, for observers of their events.
type Submitter interface {
	Runner
	// Submit starts a run with prompt and returns its id, as the
	// runner's own Submit does.
	Submit(ctx context.Context, rt *agent.Runtime, prompt string, opts *Options) (string, error)
}

// Kinds of runners, as [KindOf] names them.
const (
	KindAgent    = "agent"
	KindTeam     = "team"
	KindWorkflow = "workflow"
)

// KindOf returns the kind of r: [KindAgent], [KindTeam] or [KindWorkflow]
// for the runners of [Agent], [Team] and [Workflow], "" for another
// Runner.
func KindOf(r Runner) string {
	if k, ok := r.(interface{ kind() string }); ok {
		return k.kind()
	}
	return ""
}

// InputChannel returns the channel on which the runs of r start, by its
// kind ([KindOf]), or "" for a Runner of another kind.
func InputChannel(r Runner) string {
	switch KindOf(r) {
	case KindAgent:
		return agent.InputChannel(r.Name())
	case KindTeam:
		return team.InputChannel(r.Name())
	case KindWorkflow:
		return workflow.InputChannel(r.Name())
	}
	return ""
}

// Servable is a Runner that subscribes its handlers on a runtime, so
// that the runtime's process carries out its runs: [Agent]'s, [Team]'s and
// [Workflow]'s runners are. A team's members and a workflow's agent nodes
// are served as their runs start on a runtime that serves on demand
// (agent.RuntimeOptions.ServeOnDemand), or by serving them too.
type Servable interface {
	Runner
	// Serve subscribes the handlers on rt, as the agent's, team's or
	// workflow's own Serve does with its default options.
	Serve(ctx context.Context, rt *agent.Runtime) error
}

// Options say how to start a run.
type Options struct {
	// RunID names the run: default, a fresh id. Starting a run id again
	// starts nothing new.
	RunID string
	// SessionID continues a conversation (agents only; teams carry it on
	// their events).
	SessionID string
	// Thread is the conversation the run continues, for a client that
	// keeps it itself and sends it whole (agent.RunOptions.Thread): the
	// prompt is added to it as a user message. Agents only: teams and
	// workflows return an error matching [ErrThread] for a thread with
	// messages. Not together with SessionID.
	Thread []model.Message
	// Deps are the run's dependencies (agent.RunOptions.Deps), which
	// travel with it to the workers and which its tools read with
	// agent.Deps.Of. Agents only: teams and workflows ignore them.
	// Default: none.
	Deps agent.DepsValue
}

// ErrThread is returned by the runners of teams and workflows when
// [Options.Thread] has messages: they continue a conversation through a
// session only.
var ErrThread = errors.New("runner: only an agent continues a conversation given as messages")

// Progress is an event of a run, told as it happens.
type Progress struct {
	// Message says what happened, for people: "helper: calling add".
	Message string
	// Delta is a piece of the answer's text, for runners that stream it.
	Delta string
	// Event is the agent event the progress comes from, when it is one
	// (an agent's events, and the events of a team's member agents): its
	// kind, step and payload, for edges that show more than text.
	Event *agent.Event
}

// Status is how a run stands.
type Status string

// Run statuses.
const (
	Running   Status = "running"
	Waiting   Status = "waiting" // paused, interrupted, or waiting for an approval
	Complete  Status = "complete"
	Failed    Status = "failed"
	Cancelled Status = "cancelled"
)

// Ended reports whether s is an end.
func (s Status) Ended() bool { return s == Complete || s == Failed || s == Cancelled }

// Result is how a run stands or ended.
type Result struct {
	RunID  string
	Status Status
	// Text is the output of a complete run: the answer, or a structured
	// output's JSON text.
	Text string
	// Structured is a structured output as JSON, when the output is not
	// text.
	Structured json.RawMessage
	// Error says why a run failed or was cancelled.
	Error string
	// NotServed reports that the run was cancelled before it started
	// because no process serves its runner ([agent.ErrNotServed]).
	NotServed bool
	// Usage counts the model calls of an agent's run, from its output
	// (zero for teams and workflows, and for a run read with Status).
	Usage model.Usage
}

// outputResult is the result of a complete run with content, a JSON value.
func outputResult(runID string, content json.RawMessage) *Result {
	r := &Result{RunID: runID, Status: Complete}
	var s string
	if json.Unmarshal(content, &s) == nil {
		r.Text = s
	} else {
		r.Text, r.Structured = string(content), content
	}
	return r
}

// ended turns the error that ended a stream into a Result when it is a
// run's failure or cancellation. A run held up by a parked message has
// neither failed nor ended: its error (matching [agent.ErrRunParked]) is
// returned, for the caller to say what to do (replay the dead letter).
func ended(ctx context.Context, runID string, err error) (*Result, error) {
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	var re *agent.RunError
	if errors.As(err, &re) && !errors.Is(err, agent.ErrRunParked) {
		st := Failed
		if re.Status == agent.RunCancelled {
			st = Cancelled
		}
		return &Result{RunID: cmp.Or(re.RunID, runID), Status: st, Error: re.Error(), NotServed: errors.Is(err, agent.ErrNotServed)}, nil
	}
	return nil, err
}

// Agent returns a as a Runner.
func Agent[Out any](a *agent.Agent[Out]) Runner { return &agentRunner[Out]{a: a} }

type agentRunner[Out any] struct{ a *agent.Agent[Out] }

func (r *agentRunner[Out]) kind() string        { return KindAgent }
func (r *agentRunner[Out]) Name() string        { return r.a.Name() }
func (r *agentRunner[Out]) Description() string { return r.a.Description() }

// Tools returns the agent's tools, for the skills an A2A card lists.
func (r *agentRunner[Out]) Tools() []model.ToolDefinition { return r.a.Tools() }

func (r *agentRunner[Out]) Run(ctx context.Context, rt *agent.Runtime, prompt string, opts *Options, progress func(Progress)) (*Result, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	runID := o.RunID
	for ev, err := range r.a.RunStream(ctx, rt, prompt, &agent.RunOptions{RunID: o.RunID, SessionID: o.SessionID, Thread: o.Thread, Deps: o.Deps}) {
		if err != nil {
			return ended(ctx, runID, err)
		}
		if runID == "" {
			runID = ev.RunID
		}
		if progress != nil {
			if p, ok := ProgressOf(ev); ok {
				progress(p)
			}
		}
		if ev.Kind == agent.EventOutput {
			id := cmp.Or(ev.Output.RunID, runID)
			switch ev.Output.Status {
			case agent.OutputComplete:
			case agent.OutputCancelled:
				return &Result{RunID: id, Status: Cancelled, Error: ev.Output.Error, Usage: ev.Output.Usage}, nil
			default:
				return &Result{RunID: id, Status: Failed, Error: ev.Output.Error, Usage: ev.Output.Usage}, nil
			}
			if _, err := r.a.DecodeOutput(ev.Output); err != nil {
				return nil, err
			}
			res := outputResult(id, ev.Output.Content)
			res.Usage = ev.Output.Usage
			return res, nil
		}
	}
	return nil, errors.New("runner: the run's stream ended without an output")
}

func (r *agentRunner[Out]) Serve(ctx context.Context, rt *agent.Runtime) error {
	return r.a.Serve(ctx, rt, nil)
}

func (r *agentRunner[Out]) Submit(ctx context.Context, rt *agent.Runtime, prompt string, opts *Options) (string, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	return r.a.Submit(ctx, rt, prompt, &agent.RunOptions{RunID: o.RunID, SessionID: o.SessionID, Thread: o.Thread, Deps: o.Deps, Stream: true})
}

func (r *agentRunner[Out]) Status(ctx context.Context, rt *agent.Runtime, runID string) (*Result, error) {
	if rt == nil {
		return nil, agent.ErrNoRuntime
	}
	st, err := rt.LoadAgentRun(ctx, runID)
	if err != nil {
		return nil, err
	}
	// A run that handed off answers with the end of its chain.
	for hops := 0; st.Status == agent.RunHandedOff && st.HandedOffTo != nil && hops < 100; hops++ {
		next, err := rt.LoadAgentRun(ctx, st.HandedOffTo.RunID)
		if errors.Is(err, store.ErrNotFound) {
			return &Result{RunID: runID, Status: Running}, nil
		}
		if err != nil {
			return nil, err
		}
		st = next
	}
	switch {
	case st.Status == agent.RunComplete:
		return outputResult(st.ID, st.Output), nil
	case st.Status == agent.RunFailed:
		return &Result{RunID: st.ID, Status: Failed, Error: st.Error}, nil
	case st.Status == agent.RunCancelled:
		return &Result{RunID: st.ID, Status: Cancelled, Error: st.Error}, nil
	case st.Paused || st.Status == agent.RunHandedOff:
		return &Result{RunID: st.ID, Status: Waiting}, nil
	}
	return &Result{RunID: st.ID, Status: Running}, nil
}

func (r *agentRunner[Out]) Cancel(ctx context.Context, rt *agent.Runtime, runID, reason string) error {
	return r.a.Cancel(ctx, rt, runID, reason)
}

func (r *agentRunner[Out]) Pause(ctx context.Context, rt *agent.Runtime, runID, reason string) error {
	return r.a.Pause(ctx, rt, runID, reason)
}

func (r *agentRunner[Out]) Resume(ctx context.Context, rt *agent.Runtime, runID string) error {
	return r.a.Resume(ctx, rt, runID)
}

// ProgressOf returns the progress an agent's runner reports for ev: a
// delta's text, or what [Describe] says of it; false for an event not
// reported.
func ProgressOf(ev agent.Event) (Progress, bool) {
	if ev.Kind == agent.EventDelta && ev.Delta.Text != "" {
		return Progress{Delta: ev.Delta.Text, Event: &ev}, true
	}
	if msg := Describe(ev); msg != "" {
		return Progress{Message: msg, Event: &ev}, true
	}
	return Progress{}, false
}

// Describe says what an agent event is, in a few words for people, or ""
// for events not worth telling (deltas, inputs, outputs).
func Describe(ev agent.Event) string {
	who := ev.Agent
	switch ev.Kind {
	case agent.EventInference:
		return fmt.Sprintf("%s: model call %d", who, ev.Step)
	case agent.EventToolCall:
		return fmt.Sprintf("%s: calling %s", who, ev.ToolCall.ToolName)
	case agent.EventToolResult:
		return fmt.Sprintf("%s: %s returned (%s)", who, ev.ToolResult.ToolName, ev.ToolResult.Status)
	case agent.EventHandoff:
		return fmt.Sprintf("%s: handed off", who)
	case agent.EventSubagentSpawned:
		return fmt.Sprintf("%s: started %s", who, ev.Subagent.Agent)
	case agent.EventApproval:
		return fmt.Sprintf("%s: approval of %s %s", who, ev.Approval.ToolName, ev.Approval.Status)
	case agent.EventPause:
		if ev.Pause.Paused {
			return fmt.Sprintf("%s: paused", who)
		}
		return fmt.Sprintf("%s: resumed", who)
	case agent.EventCustom:
		return fmt.Sprintf("%s: %s", who, ev.Custom.Type)
	}
	return ""
}

// Team returns t as a Runner: the team's answer is the text.
func Team(t *team.Team) Runner { return teamRunner{t} }

type teamRunner struct{ t *team.Team }

func (r teamRunner) kind() string        { return KindTeam }
func (r teamRunner) Name() string        { return r.t.Name() }
func (r teamRunner) Description() string { return r.t.Description() }

func (r teamRunner) Run(ctx context.Context, rt *agent.Runtime, prompt string, opts *Options, progress func(Progress)) (*Result, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if len(o.Thread) > 0 {
		return nil, fmt.Errorf("team %s: %w", r.t.Name(), ErrThread)
	}
	runID := o.RunID
	for ev, err := range r.t.RunStream(ctx, rt, prompt, &team.RunOptions{RunID: o.RunID, SessionID: o.SessionID}) {
		if err != nil {
			return ended(ctx, runID, err)
		}
		if runID == "" {
			runID = ev.RunID
		}
		switch ev.Kind {
		case team.EventStep:
			if progress != nil {
				progress(Progress{Message: fmt.Sprintf("%s: step %d", r.t.Name(), ev.Step)})
			}
		case team.EventMember:
			if progress != nil && ev.Agent != nil && ev.Agent.Kind != "" {
				if msg := Describe(*ev.Agent); msg != "" {
					progress(Progress{Message: msg, Event: ev.Agent})
				}
			}
		case team.EventOutput:
			return outputResult(runID, ev.Output.Content), nil
		}
	}
	return nil, errors.New("runner: the team run's stream ended without an output")
}

func (r teamRunner) Serve(ctx context.Context, rt *agent.Runtime) error {
	return r.t.Serve(ctx, rt, nil)
}

func (r teamRunner) Submit(ctx context.Context, rt *agent.Runtime, prompt string, opts *Options) (string, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if len(o.Thread) > 0 {
		return "", fmt.Errorf("team %s: %w", r.t.Name(), ErrThread)
	}
	return r.t.Submit(ctx, rt, prompt, &team.RunOptions{RunID: o.RunID, SessionID: o.SessionID, Stream: true})
}

func (r teamRunner) Status(ctx context.Context, rt *agent.Runtime, runID string) (*Result, error) {
	st, err := r.t.LoadRun(ctx, rt, runID)
	if err != nil {
		return nil, err
	}
	switch {
	case st.Status == agent.RunComplete:
		out, _ := json.Marshal(st.Output)
		return outputResult(runID, out), nil
	case st.Status == agent.RunFailed:
		return &Result{RunID: runID, Status: Failed, Error: st.Error}, nil
	case st.Status == agent.RunCancelled:
		return &Result{RunID: runID, Status: Cancelled, Error: st.Error}, nil
	case st.Paused:
		return &Result{RunID: runID, Status: Waiting}, nil
	}
	return &Result{RunID: runID, Status: Running}, nil
}

func (r teamRunner) Cancel(ctx context.Context, rt *agent.Runtime, runID, reason string) error {
	return r.t.Cancel(ctx, rt, runID, reason)
}

func (r teamRunner) Pause(ctx context.Context, rt *agent.Runtime, runID, reason string) error {
	return r.t.Pause(ctx, rt, runID, reason)
}

func (r teamRunner) Resume(ctx context.Context, rt *agent.Runtime, runID string) error {
	return r.t.Resume(ctx, rt, runID)
}

// Workflow returns w as a Runner described by description: in turns the
// prompt into the workflow's input state, out its final state into the
// text.
func Workflow[S any](w *workflow.Workflow[S], description string, in func(prompt string) (S, error), out func(s S) (string, error)) Runner {
	return &workflowRunner[S]{w: w, description: description, in: in, out: out}
}

type workflowRunner[S any] struct {
	w           *workflow.Workflow[S]
	description string
	in          func(string) (S, error)
	out         func(S) (string, error)
}

func (r *workflowRunner[S]) kind() string        { return KindWorkflow }
func (r *workflowRunner[S]) Name() string        { return r.w.Name() }
func (r *workflowRunner[S]) Description() string { return r.description }

func (r *workflowRunner[S]) final(runID string, state json.RawMessage) (*Result, error) {
	var final S
	if err := json.Unmarshal(state, &final); err != nil {
		return nil, fmt.Errorf("workflow %s: decode the final state: %w", r.w.Name(), err)
	}
	text, err := r.out(final)
	if err != nil {
		return nil, err
	}
	return &Result{RunID: runID, Status: Complete, Text: text}, nil
}

func (r *workflowRunner[S]) Run(ctx context.Context, rt *agent.Runtime, prompt string, opts *Options, progress func(Progress)) (*Result, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if len(o.Thread) > 0 {
		return nil, fmt.Errorf("workflow %s: %w", r.w.Name(), ErrThread)
	}
	s, err := r.in(prompt)
	if err != nil {
		return nil, err
	}
	runID := o.RunID
	for ev, err := range r.w.RunStream(ctx, rt, s, &workflow.RunOptions{RunID: o.RunID}) {
		if err != nil {
			return ended(ctx, runID, err)
		}
		if runID == "" {
			runID = ev.RunID
		}
		switch ev.Kind {
		case workflow.EventNodeDone:
			if progress != nil {
				progress(Progress{Message: fmt.Sprintf("%s: %s done", r.w.Name(), ev.Node)})
			}
		case workflow.EventOutput:
			switch ev.Output.Status {
			case workflow.OutputComplete:
				return r.final(runID, ev.Output.State)
			case workflow.OutputInterrupted:
				return &Result{RunID: runID, Status: Waiting}, nil
			}
			return &Result{RunID: runID, Status: Failed, Error: ev.Output.Error}, nil
		}
	}
	return nil, errors.New("runner: the workflow run's stream ended without an output")
}

func (r *workflowRunner[S]) Serve(ctx context.Context, rt *agent.Runtime) error {
	return r.w.Serve(ctx, rt, nil)
}

// Submit starts a run of the workflow on the input state made of prompt.
// A workflow has no session: opts.SessionID is not used.
func (r *workflowRunner[S]) Submit(ctx context.Context, rt *agent.Runtime, prompt string, opts *Options) (string, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if len(o.Thread) > 0 {
		return "", fmt.Errorf("workflow %s: %w", r.w.Name(), ErrThread)
	}
	s, err := r.in(prompt)
	if err != nil {
		return "", err
	}
	return r.w.Submit(ctx, rt, s, &workflow.RunOptions{RunID: o.RunID})
}

func (r *workflowRunner[S]) Status(ctx context.Context, rt *agent.Runtime, runID string) (*Result, error) {
	st, err := r.w.LoadRun(ctx, rt, runID)
	if err != nil {
		return nil, err
	}
	switch st.Status {
	case workflow.RunComplete:
		return r.final(runID, st.State)
	case workflow.RunFailed:
		return &Result{RunID: runID, Status: Failed, Error: st.Error}, nil
	case workflow.RunCancelled:
		return &Result{RunID: runID, Status: Cancelled, Error: st.Error}, nil
	case workflow.RunInterrupted:
		return &Result{RunID: runID, Status: Waiting}, nil
	}
	if st.Paused {
		return &Result{RunID: runID, Status: Waiting}, nil
	}
	return &Result{RunID: runID, Status: Running}, nil
}

func (r *workflowRunner[S]) Cancel(ctx context.Context, rt *agent.Runtime, runID, reason string) error {
	return r.w.Cancel(ctx, rt, runID, reason)
}

func (r *workflowRunner[S]) Pause(ctx context.Context, rt *agent.Runtime, runID, reason string) error {
	return r.w.Pause(ctx, rt, runID, reason)
}

func (r *workflowRunner[S]) Resume(ctx context.Context, rt *agent.Runtime, runID string) error {
	return r.w.Resume(ctx, rt, runID)
}
