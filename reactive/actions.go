package reactive

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// ActionFunc changes a state: it gets the current state and the action's
// payload, and returns the new state and the paths it changed ("user.name",
// "agents.translator.should_act"; see [Delta.Paths]).
//
// The state it gets is shared with the store's snapshot and history: it
// must not change a map or a slice of it in place, but copy what it
// changes (copy-on-write). A struct field it sets on its copy of s is its
// own. An error leaves the state as it was.
type ActionFunc[S, P any] func(s S, payload P) (S, []string, error)

// action is an action over S with its payload as JSON.
type action[S any] struct {
	name string
	run  func(s S, payload json.RawMessage) (S, []string, error)
}

// Actions is a set of named actions over a state S: a store's, or a part
// of one that [Mount] puts at a path of a larger state. The zero value is
// empty and ready to use; it is not safe for concurrent use while actions
// are added.
type Actions[S any] struct {
	byName map[string]*action[S]
}

var actionNameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]+(\.[a-zA-Z0-9_-]+)*$`)

// ErrUnknownAction is returned for an action a store does not have.
var ErrUnknownAction = errors.New("reactive: unknown action")

// ErrPayload is matched by the error of an action whose payload does not
// decode.
var ErrPayload = errors.New("reactive: invalid payload")

func (a *Actions[S]) add(name string, run func(S, json.RawMessage) (S, []string, error)) error {
	if !actionNameRE.MatchString(name) {
		return fmt.Errorf("reactive: action name %q must match %s", name, actionNameRE)
	}
	if a.byName == nil {
		a.byName = map[string]*action[S]{}
	}
	if _, dup := a.byName[name]; dup {
		return fmt.Errorf("reactive: action %q is registered already", name)
	}
	a.byName[name] = &action[S]{name: name, run: run}
	return nil
}

// Action registers fn as the action name of a. Its payload travels as
// JSON: P must encode to JSON and back.
func Action[S, P any](a *Actions[S], name string, fn ActionFunc[S, P]) error {
	return a.add(name, func(s S, raw json.RawMessage) (S, []string, error) {
		var p P
		if len(raw) > 0 && string(raw) != "null" {
			if err := json.Unmarshal(raw, &p); err != nil {
				return s, nil, fmt.Errorf("%w for action %s: %v", ErrPayload, name, err)
			}
		}
		return fn(s, p)
	})
}

// MustAction is like Action but panics on error, for actions registered
// at package level.
func MustAction[S, P any](a *Actions[S], name string, fn ActionFunc[S, P]) {
	if err := Action(a, name, fn); err != nil {
		panic(err)
	}
}

// Names returns the names of the actions, sorted.
func (a *Actions[S]) Names() []string {
	names := make([]string, 0, len(a.byName))
	for n := range a.byName {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Has reports whether a has the action name.
func (a *Actions[S]) Has(name string) bool {
	_, ok := a.byName[name]
	return ok
}

// Mount puts the actions of a part T of the state S at path: each action
// of child becomes an action of parent named path + "." + its name, that
// runs on get(s) and puts the result back with set, its changed paths
// prefixed with path. child stays usable on its own (a store of T alone),
// so a part can be built and tested by itself and then assembled with
// others into the whole.
func Mount[S, T any](parent *Actions[S], path string, child *Actions[T], get func(S) T, set func(S, T) S) error {
	if !actionNameRE.MatchString(path) {
		return fmt.Errorf("reactive: mount path %q must match %s", path, actionNameRE)
	}
	var errs []error
	for _, name := range child.Names() {
		c := child.byName[name]
		errs = append(errs, parent.add(path+"."+name, func(s S, raw json.RawMessage) (S, []string, error) {
			t, paths, err := c.run(get(s), raw)
			if err != nil {
				return s, nil, err
			}
			out := make([]string, len(paths))
			for i, p := range paths {
				out[i] = joinPath(path, p)
			}
			return set(s, t), out, nil
		}))
	}
	return errors.Join(errs...)
}

func joinPath(prefix, p string) string {
	if p == "" {
		return prefix
	}
	return prefix + "." + p
}

// MatchPath reports whether a change at path concerns a subscription to
// pattern: the segments (separated by '.') of pattern match those of path,
// '*' matching any one segment, and either is a prefix of the other: a
// change at "agents.translator.should_act" concerns "agents.translator.*"
// and "agents", and a change that replaces "agents" concerns
// "agents.translator.should_act" too. The empty pattern, and "*" alone,
// match every path.
func MatchPath(pattern, path string) bool {
	if pattern == "" || pattern == "*" {
		return true
	}
	for pattern != "" && path != "" {
		var p, x string
		p, pattern, _ = strings.Cut(pattern, ".")
		x, path, _ = strings.Cut(path, ".")
		if p != "*" && p != x {
			return false
		}
	}
	return true
}

// matchAny reports whether any of paths concerns pattern.
func matchAny(pattern string, paths []string) bool {
	return slices.ContainsFunc(paths, func(p string) bool { return MatchPath(pattern, p) })
}
