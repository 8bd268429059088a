//lint:file-ignore U1000 Agent's methods are reached through the AppAgent interface, which the unused check does not follow for generic types

package reactive

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/model"
)

// AgentState is the part of a state that drives one agent: the agent acts
// while ShouldAct is true, choosing among CurrentlyAvailableActions, which
// actions may change but only within AvailableActions, the hard limit set
// when the state is made. C is the agent's configuration, which its
// context may read: InitConfig as it started, CurrentConfig as actions
// have changed it.
type AgentState[C any] struct {
	ShouldAct                 bool     `json:"should_act"`
	AvailableActions          []string `json:"available_actions"`
	CurrentlyAvailableActions []string `json:"currently_available_actions"`
	InitConfig                C        `json:"init_config"`
	CurrentConfig             C        `json:"current_config"`
	// LastError says why the agent last stopped without finishing: too
	// many answers it could not act on, or too many steps.
	LastError string `json:"last_error,omitempty"`
}

// NewAgentState returns the state of an agent that may take actions, all
// available at first, with config.
func NewAgentState[C any](config C, actions ...string) AgentState[C] {
	return AgentState[C]{
		AvailableActions:          slices.Clone(actions),
		CurrentlyAvailableActions: slices.Clone(actions),
		InitConfig:                config,
		CurrentConfig:             config,
	}
}

// Choice is what a state-triggered agent's model answers: the action to
// take and its payload.
type Choice struct {
	Action  string `json:"action" jsonschema:"the name of one of the currently available actions"`
	Payload any    `json:"payload,omitempty" jsonschema:"the action's payload"`
}

// Agent is an agent that acts on a store when the state says it should:
// see [App]. Its state is the [AgentState] at Path in S. It acts on its
// model's answer only if should_act still holds once the model has
// answered (and when the action is written): an answer that comes after
// should_act was turned off is dropped, and the activation ends.
type Agent[S, C any] struct {
	// Name names the agent (letters, digits, '_', '-'); its model calls
	// are runs of a Calf agent of that name.
	Name string
	// Path is where its AgentState[C] lives in S ("agents.translator").
	Path string
	// Model answers with a [Choice].
	Model model.Model
	// StaticContext is the part of its prompt that does not change (its
	// instructions), the same for every call, so that a provider can
	// cache it.
	StaticContext string
	// Context renders the part of its prompt that the state decides, for
	// each step.
	Context func(s S, config C) string
	// MaxRetries is how many answers in a row it cannot act on (an
	// unknown or unavailable action, a payload the action refuses, output
	// that stays invalid after repairs) make it stop, with should_act
	// false and LastError set. The count includes the first answer: with
	// MaxRetries 2, the model answers wrongly once, is told why and asked
	// again once, and a second wrong answer stops the agent. Default 3.
	MaxRetries int
	// MaxSteps bounds the actions of one activation. Default 20.
	MaxSteps int
}

// stateAgent is an Agent without its configuration type, for App.
type stateAgent[S any] interface {
	name() string
	path() string
	validate(st *Store[S]) []error
	serve(ctx context.Context, rt *agent.Runtime, st *Store[S]) error
}

func (a *Agent[S, C]) name() string { return a.Name }
func (a *Agent[S, C]) path() string { return a.Path }

// state reads the agent's state in s.
func (a *Agent[S, C]) state(s S) (AgentState[C], error) {
	var as AgentState[C]
	v, ok := valueAt(reflect.ValueOf(&s).Elem(), a.Path)
	if !ok {
		return as, fmt.Errorf("reactive: agent %s: the state has nothing at %q", a.Name, a.Path)
	}
	st, ok := v.Interface().(AgentState[C])
	if !ok {
		return as, fmt.Errorf("reactive: agent %s: %q holds a %s, not an AgentState of its configuration", a.Name, a.Path, v.Type())
	}
	return st, nil
}

func (a *Agent[S, C]) validate(st *Store[S]) []error {
	var errs []error
	if !storeNameRE.MatchString(a.Name) {
		errs = append(errs, fmt.Errorf("agent name %q must match %s", a.Name, storeNameRE))
	}
	if a.Model == nil {
		errs = append(errs, fmt.Errorf("agent %s has no model", a.Name))
	}
	if a.Context == nil {
		errs = append(errs, fmt.Errorf("agent %s has no Context", a.Name))
	}
	as, err := a.state(st.Get())
	if err != nil {
		return append(errs, err)
	}
	for _, name := range as.AvailableActions {
		if !st.actions.Has(name) {
			errs = append(errs, fmt.Errorf("agent %s: action %q is not an action of store %s", a.Name, name, st.name))
		}
	}
	for _, name := range as.CurrentlyAvailableActions {
		if !slices.Contains(as.AvailableActions, name) {
			errs = append(errs, fmt.Errorf("agent %s: action %q is currently available but not among its available actions", a.Name, name))
		}
	}
	return errs
}

// TriggerGroup is the consumer group in which the workers that serve a
// state-triggered agent share its store's deltas.
func TriggerGroup(storeName, agentName string) string {
	return DeltaChannel(storeName) + ".agent." + agentName
}

func (a *Agent[S, C]) serve(ctx context.Context, rt *agent.Runtime, st *Store[S]) error {
	m := a.MaxRetries
	if m <= 0 {
		m = 3
	}
	steps := a.MaxSteps
	if steps <= 0 {
		steps = 20
	}
	chooser, err := agent.NewTyped[Choice](a.Name, a.Model, &agent.Options{
		Instructions: a.StaticContext,
		Description:  "Acts on store " + st.name + " when " + a.Path + ".should_act is true.",
		MaxTurns:     1 + agent.DefaultMaxRepairs,
	})
	if err != nil {
		return err
	}
	if err := chooser.Serve(ctx, rt, nil); err != nil {
		return err
	}
	r := &activation[S, C]{a: a, st: st, rt: rt, chooser: chooser, maxRetries: m, maxSteps: steps}
	if err := calf.CreateChannels(ctx, rt.Client().Broker(), DeltaChannel(st.name)); err != nil {
		return err
	}
	return rt.Client().Handle(ctx, DeltaChannel(st.name), r.onDelta, &calf.SubscribeOptions{Group: TriggerGroup(st.name, a.Name)})
}

type activation[S, C any] struct {
	a                    *Agent[S, C]
	st                   *Store[S]
	rt                   *agent.Runtime
	chooser              *agent.Agent[Choice]
	maxRetries, maxSteps int
}

// onDelta starts the agent when a delta sets its should_act. Deltas of a
// store are handled in order, so an activation in progress holds the
// next ones back: setting should_act again meanwhile changes nothing and
// starts nothing.
func (r *activation[S, C]) onDelta(ctx context.Context, msg *calf.Message) error {
	var d Delta
	if err := msg.Decode(&d); err != nil {
		return calf.Permanent(err)
	}
	flag := r.a.Path + ".should_act"
	if !d.Changed(flag) {
		return nil
	}
	if err := r.st.Refresh(ctx); err != nil {
		return err
	}
	as, err := r.a.state(r.st.Get())
	if err != nil || !as.ShouldAct {
		return nil
	}
	return r.run(ctx, d.Version)
}

// run acts while should_act holds.
func (r *activation[S, C]) run(ctx context.Context, version int64) error {
	var thread []model.Message
	failures := 0
	for step := 1; ; step++ {
		if err := r.st.Refresh(ctx); err != nil {
			return err
		}
		s := r.st.Get()
		as, err := r.a.state(s)
		if err != nil {
			return calf.Permanent(err)
		}
		if !as.ShouldAct {
			return nil
		}
		if step > r.maxSteps {
			return r.stop(ctx, fmt.Sprintf("stopped after %d steps with should_act still true", r.maxSteps))
		}
		prompt := r.prompt(s, as, thread)
		// The run id follows the trigger, the step and the attempt: a
		// redelivered trigger finds the runs it made.
		runID := fmt.Sprintf("%s.%s.%d.%d.%d", r.st.name, r.a.Name, version, step, failures)
		out, runErr := r.chooser.Run(ctx, r.rt, prompt, &agent.RunOptions{RunID: runID, Thread: thread})
		if runErr != nil && ctx.Err() != nil {
			return ctx.Err()
		}
		// The state may have changed while the model answered: the answer
		// counts only if the agent should still act.
		if err := r.st.Refresh(ctx); err != nil {
			return err
		}
		if as, err = r.a.state(r.st.Get()); err != nil {
			return calf.Permanent(err)
		}
		if !as.ShouldAct {
			return nil
		}
		var problem string
		if runErr != nil {
			problem = "your answer could not be used: " + runErr.Error()
		} else {
			var stopped bool
			if problem, stopped = r.act(ctx, as, out.Output); stopped {
				return nil
			}
		}
		if problem == "" {
			thread, failures = nil, 0
			continue
		}
		failures++
		if failures >= r.maxRetries {
			return r.stop(ctx, fmt.Sprintf("stopped after %d answers it could not act on; the last: %s", failures, problem))
		}
		if out != nil {
			thread = out.Thread
		}
		thread = append(thread, model.UserMessage(problem+"\nAnswer again with one of the currently available actions."))
		step-- // a retry is not a step
	}
}

// prompt is the dynamic part of the prompt of a step.
func (r *activation[S, C]) prompt(s S, as AgentState[C], thread []model.Message) string {
	if len(thread) > 0 {
		return "" // the thread ends with what to correct
	}
	var b strings.Builder
	b.WriteString(r.a.Context(s, as.CurrentConfig))
	b.WriteString("\n\nAnswer with JSON: {\"action\": NAME, \"payload\": VALUE}. The currently available actions: ")
	b.WriteString(strings.Join(as.CurrentlyAvailableActions, ", "))
	b.WriteString(".")
	return b.String()
}

// errNotActing is the condition of an agent's dispatch that found its
// should_act false.
var errNotActing = errors.New("reactive: the agent should no longer act")

// act dispatches the chosen action, or says why it cannot; stopped says
// that should_act was false when the action was to be written, and the
// action was dropped.
func (r *activation[S, C]) act(ctx context.Context, as AgentState[C], c Choice) (problem string, stopped bool) {
	switch {
	case !r.st.actions.Has(c.Action):
		return fmt.Sprintf("%q is not an action; the currently available actions are: %s", c.Action, strings.Join(as.CurrentlyAvailableActions, ", ")), false
	case !slices.Contains(as.CurrentlyAvailableActions, c.Action) || !slices.Contains(as.AvailableActions, c.Action):
		return fmt.Sprintf("the action %q is not available now; the currently available actions are: %s", c.Action, strings.Join(as.CurrentlyAvailableActions, ", ")), false
	}
	_, err := r.st.dispatchIf(ctx, "", c.Action, c.Payload, func(s S) error {
		as, err := r.a.state(s)
		if err != nil {
			return err
		}
		if !as.ShouldAct {
			return errNotActing
		}
		return nil
	})
	switch {
	case err == nil || ctx.Err() != nil:
		return "", false
	case errors.Is(err, errNotActing):
		return "", true
	}
	return fmt.Sprintf("the action %q failed: %v", c.Action, err), false
}

// stop sets should_act false with why.
func (r *activation[S, C]) stop(ctx context.Context, why string) error {
	_, err := r.st.Dispatch(ctx, r.a.Name+".stop", why)
	return err
}

// errInvalidApp lists what is wrong with an app.
var errInvalidApp = errors.New("reactive: invalid app")

// Agent is an AppAgent.
var _ AppAgent[struct{}] = (*Agent[struct{}, struct{}])(nil)
