package reactive

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
)

// Rule is an orchestration rule: given the state after a change and the
// change, it says which actions to dispatch, such as setting an agent's
// should_act ("translator.act", true) when the summary is ready.
type Rule[S any] func(s S, d *Delta) []Dispatch

// Dispatch is an action to dispatch, with its payload.
type Dispatch struct {
	Action  string
	Payload any
}

// App wires state-triggered agents and orchestration rules to a store:
// each agent acts, on whichever worker serves the app, when a change sets
// its should_act, and each rule runs on each change. There is no polling:
// agents and rules are handlers of the store's deltas on the broker.
//
// For each agent NAME, the app adds to the store the actions NAME.act
// (payload: a bool, its should_act), NAME.stop (payload: why, as a
// string; should_act false and LastError set) and NAME.set_available
// (payload: the action names it may take now, within its available
// actions).
type App[S any] struct {
	store  *Store[S]
	agents []stateAgent[S]
	rules  []Rule[S]
}

// NewApp returns an app of store, agents (each an *Agent[S, C]) and
// rules. It checks that every agent's state is where it says and that
// every action it may take is one of the store's, and lists every problem
// at once; the store needs a broker client ([Options.Client]).
func NewApp[S any](store *Store[S], agents []AppAgent[S], rules ...Rule[S]) (*App[S], error) {
	app := &App[S]{store: store, rules: rules}
	var errs []error
	if store.opts.Client == nil {
		errs = append(errs, fmt.Errorf("store %s has no broker client (Options.Client): agents react to its deltas on the broker", store.name))
	}
	names := map[string]bool{}
	for _, sa := range agents {
		if sa == nil {
			errs = append(errs, errors.New("a nil agent"))
			continue
		}
		if names[sa.name()] {
			errs = append(errs, fmt.Errorf("two agents are named %s", sa.name()))
		}
		names[sa.name()] = true
		app.agents = append(app.agents, sa)
	}
	for _, sa := range app.agents {
		errs = append(errs, app.addActions(sa)...)
	}
	for _, sa := range app.agents {
		errs = append(errs, sa.validate(store)...)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w:\n%w", errInvalidApp, errors.Join(errs...))
	}
	return app, nil
}

// AppAgent is an agent of an app: an *Agent[S, C] of any configuration C.
type AppAgent[S any] interface {
	stateAgent[S]
}

// addActions adds the agent's built-in actions to the store.
func (app *App[S]) addActions(sa stateAgent[S]) []error {
	path, name := sa.path(), sa.name()
	set := func(s S, sub string, v any) (S, error) {
		raw, err := json.Marshal(v)
		if err != nil {
			return s, err
		}
		return setJSONAt(s, path+"."+sub, raw)
	}
	var errs []error
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	add(Action(app.store.actions, name+".act", func(s S, on bool) (S, []string, error) {
		cur, ok := valueAt(reflect.ValueOf(&s).Elem(), path+".should_act")
		if ok && cur.Kind() == reflect.Bool && cur.Bool() == on {
			return s, nil, nil // as it was: no change, no trigger
		}
		s, err := set(s, "should_act", on)
		return s, []string{path + ".should_act"}, err
	}))
	add(Action(app.store.actions, name+".stop", func(s S, why string) (S, []string, error) {
		s, err := set(s, "should_act", false)
		if err != nil {
			return s, nil, err
		}
		s, err = set(s, "last_error", why)
		return s, []string{path + ".should_act", path + ".last_error"}, err
	}))
	add(Action(app.store.actions, name+".set_available", func(s S, names []string) (S, []string, error) {
		v, ok := valueAt(reflect.ValueOf(&s).Elem(), path+".available_actions")
		if !ok {
			return s, nil, fmt.Errorf("agent %s has no available_actions at %s", name, path)
		}
		allowed, _ := v.Interface().([]string)
		for _, n := range names {
			if !slices.Contains(allowed, n) {
				return s, nil, fmt.Errorf("agent %s may not take action %q: its available actions are %v", name, n, allowed)
			}
		}
		s, err := set(s, "currently_available_actions", names)
		return s, []string{path + ".currently_available_actions"}, err
	}))
	return errs
}

// RulesGroup is the consumer group in which the workers that serve an app
// share the running of its rules.
func RulesGroup(storeName string) string { return DeltaChannel(storeName) + ".rules" }

// Serve serves the app on rt: its agents' handlers (each agent is also a
// Calf agent, whose model calls are runs) and its rules, until ctx ends
// or rt's client shuts down. Serve it in as many processes as wanted:
// each change triggers each agent and each rule once. A change's message
// may be delivered again (a worker that failed or crashed before
// acknowledging it): the rules then run again, but each of their
// dispatches takes effect once, known by the change's version, the rule
// and its place among the rule's dispatches, and kept with the state
// among the store's last 1,024 such dispatches.
func (app *App[S]) Serve(ctx context.Context, rt *agent.Runtime) error {
	for _, sa := range app.agents {
		if err := sa.serve(ctx, rt, app.store); err != nil {
			return fmt.Errorf("reactive: serve agent %s: %w", sa.name(), err)
		}
	}
	if len(app.rules) == 0 {
		return nil
	}
	return rt.Client().Handle(ctx, DeltaChannel(app.store.name), func(ctx context.Context, msg *calf.Message) error {
		var d Delta
		if err := msg.Decode(&d); err != nil {
			return calf.Permanent(err)
		}
		if err := app.store.Refresh(ctx); err != nil {
			return err
		}
		s := app.store.Get()
		for i, rule := range app.rules {
			for j, do := range rule(s, &d) {
				id := "rule/" + strconv.FormatInt(d.Version, 10) + "/" + strconv.Itoa(i) + "/" + strconv.Itoa(j)
				if _, err := app.store.dispatchOnce(ctx, id, do.Action, do.Payload); err != nil {
					if errors.Is(err, ErrUnknownAction) || errors.Is(err, ErrPayload) {
						app.store.log.Warn("reactive: a rule's dispatch", "store", app.store.name, "rule", strconv.Itoa(i), "action", do.Action, "err", err)
						continue
					}
					return err
				}
			}
		}
		return nil
	}, &calf.SubscribeOptions{Group: RulesGroup(app.store.name)})
}
