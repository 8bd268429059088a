package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"time"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/internal/runlife"
)

// Start and End are the reserved node names of every graph: an edge from
// Start names the entry node, and an edge (or a route) to End completes
// the run.
const (
	Start = "start"
	End   = "end"
)

// Defaults of [Options].
const (
	DefaultMaxSteps    = 1000
	DefaultMaxVisits   = 25
	DefaultNodeTimeout = 10 * time.Minute
)

// Options configures a workflow. A nil *Options means the defaults.
type Options struct {
	// MaxSteps bounds the steps of one run. Default: DefaultMaxSteps.
	MaxSteps int
	// MaxVisits bounds how many times one node may run in one run, so that
	// a loop ends even if its condition never does. Builder.MaxVisits sets
	// it for one node. Default: DefaultMaxVisits.
	MaxVisits int
	// NodeTimeout bounds one call of a function node; a node that runs
	// longer fails the run. (An agent node is bounded by its agent's
	// own timeouts.) Default: DefaultNodeTimeout.
	NodeTimeout time.Duration
	// Flow, when set, holds the workflow's runs to limits per key across
	// every process that serves it: concurrency, rate, debounce and
	// priority (see [agent.FlowControl]); the key is computed from the
	// run's input, whose "state" field is the initial state's JSON.
	// Default: none.
	Flow *agent.FlowControl
}

// ErrInvalidWorkflow is returned by [Builder.Build] for a graph that
// cannot run; the error lists every problem found.
var ErrInvalidWorkflow = errors.New("workflow: invalid workflow")

var nameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// Node is one node of a graph: a function of the state ([Func]), an agent
// run ([AgentNode]) or a run of another workflow ([SubWorkflow]).
type Node[S any] struct {
	fn    func(ctx context.Context, s S) (S, error)
	agent *childCall[S]
}

// Func returns a node that runs fn. fn gets a copy of the state and
// returns the next state; [Info] and [ResumeInput] tell it about the run.
// An error from fn fails the run, except [Interrupt], which suspends it,
// and an error returned while ctx is done (the worker is shutting down),
// after which the step is delivered again.
func Func[S any](fn func(ctx context.Context, s S) (S, error)) Node[S] {
	return Node[S]{fn: fn}
}

// childCall is a node that starts a child run (of an agent or a
// workflow) and completes when the child's reply arrives.
type childCall[S any] struct {
	// kind is the kind of the child runs ("agent" or "workflow"), name
	// their agent's or workflow's name.
	kind, name string
	// submit starts the child run runID, bounded by budget when it is not
	// nil.
	submit func(ctx context.Context, rt *agent.Runtime, s S, runID, parent string, reply *agent.ReplyTo, budget *agent.Budget) error
	apply  func(s S, ev *agent.OutputEvent) (S, error)
	// cancel cancels the child run runID.
	cancel func(ctx context.Context, rt *agent.Runtime, runID, reason string) error
}

// AgentNode returns a node that runs agent a: prompt turns the state into
// the agent's prompt, and apply folds the agent's output into the state.
// The agent's run is a child run, carried out by whichever workers serve
// the agent (on a runtime that serves on demand, this process first); the
// workflow waits for it without a goroutine: the run's
// reply is an event on the workflow's reply channel. A failed agent run
// fails the workflow run. The agent's runs carry no dependencies, so
// an agent that needs some must get them from ServeOptions.LocalDeps.
func AgentNode[S, Out any](a *agent.Agent[Out], prompt func(s S) (string, error), apply func(s S, out Out) (S, error)) Node[S] {
	return Node[S]{agent: &childCall[S]{
		kind: "agent", name: a.Name(),
		submit: func(ctx context.Context, rt *agent.Runtime, s S, runID, parent string, reply *agent.ReplyTo, budget *agent.Budget) error {
			p, err := prompt(s)
			if err != nil {
				return &promptError{err}
			}
			_, err = a.Submit(ctx, rt, p, &agent.RunOptions{RunID: runID, ReplyTo: reply, Parent: parent, Budget: budget})
			return err
		},
		cancel: func(ctx context.Context, rt *agent.Runtime, runID, reason string) error {
			return a.Cancel(ctx, rt, runID, reason)
		},
		apply: func(s S, ev *agent.OutputEvent) (S, error) {
			out, err := a.DecodeOutput(ev)
			if err != nil {
				return s, err
			}
			return apply(s, out)
		},
	}}
}

// TypedAgentNode returns a node that runs agent a on a typed input: input
// turns the state into a value of type In, whose JSON is the agent's input
// message, and apply folds the agent's output into the state. The agent
// reads its input as JSON, as its instructions should say (with In's
// fields, or the schema tool.SchemaFor[In] gives); an agent with a
// structured output type (agent.NewTyped) makes the node typed at both
// ends. It runs as [AgentNode]'s does; an input that does not encode as
// JSON fails the workflow run, naming the node's agent.
func TypedAgentNode[S, In, Out any](a *agent.Agent[Out], input func(s S) (In, error), apply func(s S, out Out) (S, error)) Node[S] {
	return AgentNode(a, func(s S) (string, error) {
		in, err := input(s)
		if err != nil {
			return "", err
		}
		data, err := json.Marshal(in)
		if err != nil {
			return "", fmt.Errorf("the input of agent %s does not encode as JSON: %w", a.Name(), err)
		}
		return string(data), nil
	}, apply)
}

// promptError is an error of a child node's input function (an agent
// node's prompt, a sub-workflow's input): it fails the run, where an
// error publishing the child's input is retried.
type promptError struct{ err error }

func (e *promptError) Error() string { return e.err.Error() }

// SubWorkflow returns a node that runs workflow sub as a child run: in
// turns the state into sub's input state, and out folds sub's final state
// into the state. Like an agent node, it waits for the child without a
// goroutine: the child reports its end as an event on the reply channel.
// The child's run id is "{run}.{step}.{node}"; if it interrupts, answer
// it by that id, and the parent goes on when it ends. A failed child run
// fails the parent run. sub must be served, here or elsewhere, unless
// the runtime serves on demand ([agent.RuntimeOptions.ServeOnDemand]):
// then the node serves it there.
func SubWorkflow[S, T any](sub *Workflow[T], in func(s S) (T, error), out func(s S, final T) (S, error)) Node[S] {
	return Node[S]{agent: &childCall[S]{
		kind: "workflow", name: sub.name,
		submit: func(ctx context.Context, rt *agent.Runtime, s S, runID, parent string, reply *agent.ReplyTo, budget *agent.Budget) error {
			t, err := in(s)
			if err != nil {
				return &promptError{err}
			}
			if _, err := sub.onDemand(ctx, rt); err != nil {
				return err
			}
			msg, err := sub.newInput(ctx, rt, t, &RunOptions{RunID: runID, ReplyTo: reply, Parent: parent, Budget: budget})
			if err != nil {
				return &promptError{err}
			}
			return rt.Client().Publish(ctx, msg)
		},
		cancel: func(ctx context.Context, rt *agent.Runtime, runID, reason string) error {
			return sub.cancel(ctx, rt, runID, reason, true)
		},
		apply: func(s S, ev *agent.OutputEvent) (S, error) {
			if ev.Status != agent.OutputComplete {
				return s, fmt.Errorf("workflow %s: run %s: %s", sub.name, ev.RunID, ev.Error)
			}
			var t T
			if err := json.Unmarshal(ev.Content, &t); err != nil {
				return s, fmt.Errorf("workflow %s: run %s: decode state: %w", sub.name, ev.RunID, err)
			}
			return out(s, t)
		},
	}}
}

// fanOut is a parallel step: after node from, the branches run on copies
// of its state, merge combines their states, and join runs next.
type fanOut[S any] struct {
	branches []string
	join     string
	merge    func(base S, branches []S) (S, error)
}

// Builder assembles a [Workflow]. Its methods record the graph and return
// the builder, so that calls chain; [Builder.Build] checks the whole graph
// and reports every problem at once.
type Builder[S any] struct {
	name      string
	opts      Options
	nodes     map[string]Node[S]
	order     []string
	edges     map[string][]string
	routes    map[string]*route[S]
	fanOuts   map[string]*fanOut[S]
	maxVisits map[string]int
	errs      []error
}

type route[S any] struct {
	fn      func(s S) string
	targets []string
}

// New starts the definition of a workflow named name. The name becomes
// part of the workflow's channels, so it may hold only letters, digits,
// '_' and '-'.
func New[S any](name string, opts *Options) *Builder[S] {
	b := &Builder[S]{name: name, nodes: map[string]Node[S]{}, edges: map[string][]string{},
		routes: map[string]*route[S]{}, fanOuts: map[string]*fanOut[S]{}, maxVisits: map[string]int{}}
	if opts != nil {
		b.opts = *opts
	}
	if b.opts.MaxSteps <= 0 {
		b.opts.MaxSteps = DefaultMaxSteps
	}
	if b.opts.MaxVisits <= 0 {
		b.opts.MaxVisits = DefaultMaxVisits
	}
	if b.opts.NodeTimeout <= 0 {
		b.opts.NodeTimeout = DefaultNodeTimeout
	}
	if !nameRE.MatchString(name) {
		b.errf("name %q must match %s", name, nameRE)
	}
	return b
}

func (b *Builder[S]) errf(format string, args ...any) {
	b.errs = append(b.errs, fmt.Errorf(format, args...))
}

// Node adds a node named name. Names may hold letters, digits, '_' and
// '-'; "start" and "end" are reserved.
func (b *Builder[S]) Node(name string, n Node[S]) *Builder[S] {
	switch {
	case !nameRE.MatchString(name):
		b.errf("node name %q must match %s", name, nameRE)
	case name == Start || name == End:
		b.errf("node name %q is reserved", name)
	case b.nodes[name].fn != nil || b.nodes[name].agent != nil:
		b.errf("node %q is added twice", name)
	case n.fn == nil && n.agent == nil:
		b.errf("node %q has no function: build it with Func, AgentNode or SubWorkflow", name)
	default:
		b.nodes[name] = n
		b.order = append(b.order, name)
	}
	return b
}

// Edge makes to run after from. Edge(Start, n) makes n the entry node;
// Edge(n, End) completes the run after n.
func (b *Builder[S]) Edge(from, to string) *Builder[S] {
	b.edges[from] = append(b.edges[from], to)
	return b
}

// Route makes fn choose what runs after from: fn gets the state from left
// and returns one of targets (node names, or End). A name fn returns that
// is not among targets fails the run. A route back to an earlier node
// makes a loop, bounded by MaxVisits.
func (b *Builder[S]) Route(from string, fn func(s S) string, targets ...string) *Builder[S] {
	if fn == nil {
		b.errf("route from %q has no function", from)
		return b
	}
	if _, dup := b.routes[from]; dup {
		b.errf("node %q has two routes", from)
	}
	b.routes[from] = &route[S]{fn: fn, targets: targets}
	return b
}

// Parallel makes branches run after from, at once, each on a copy of the
// state from left; when all are done, merge combines their states (given
// in the order of branches) with from's state, and join runs next.
// Branch nodes have no edges of their own. A branch may be an agent node;
// it may not interrupt.
func (b *Builder[S]) Parallel(from string, branches []string, join string, merge func(base S, branches []S) (S, error)) *Builder[S] {
	if merge == nil {
		b.errf("parallel step after %q has no merge function", from)
		return b
	}
	if len(branches) == 0 {
		b.errf("parallel step after %q has no branches", from)
		return b
	}
	if _, dup := b.fanOuts[from]; dup {
		b.errf("node %q has two parallel steps", from)
	}
	b.fanOuts[from] = &fanOut[S]{branches: slices.Clone(branches), join: join, merge: merge}
	return b
}

// MaxVisits bounds how many times node may run in one run, in place of
// Options.MaxVisits. A run that would exceed it fails with an error that
// names the node and the bound.
func (b *Builder[S]) MaxVisits(node string, n int) *Builder[S] {
	if n < 1 {
		b.errf("max visits of node %q must be at least 1, not %d", node, n)
	}
	b.maxVisits[node] = n
	return b
}

// Workflow is a validated graph of nodes over a state of type S. It does
// nothing by itself: [Workflow.Serve] turns it into handlers on an
// [agent.Runtime], and [Workflow.Run], [Workflow.RunStream] and
// [Workflow.Submit] start runs that those handlers carry out, in this
// process or on any worker that serves the workflow. S travels and is
// stored as JSON, so it must survive a JSON round trip.
type Workflow[S any] struct {
	name      string
	opts      Options
	entry     string
	nodes     map[string]Node[S]
	next      map[string]string // a node's single successor
	routes    map[string]*route[S]
	fanOuts   map[string]*fanOut[S]
	branchOf  map[string]string // branch node -> the node it fans out from
	maxVisits map[string]int

	// served records the runtimes the workflow is served on (see
	// onDemand).
	served runlife.Served[*agent.Runtime]
}

// Name returns the workflow's name.
func (w *Workflow[S]) Name() string { return w.name }

// Build checks the graph and returns the workflow. Its error matches
// [ErrInvalidWorkflow] and lists every problem: a missing entry, edges to
// or from unknown nodes, nodes with no way out or more than one, and
// nodes that cannot be reached from the entry.
func (b *Builder[S]) Build() (*Workflow[S], error) {
	errs := slices.Clone(b.errs)
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	w := &Workflow[S]{name: b.name, opts: b.opts, nodes: b.nodes, next: map[string]string{},
		routes: b.routes, fanOuts: b.fanOuts, branchOf: map[string]string{}, maxVisits: b.maxVisits}
	if err := b.opts.Flow.Check(); err != nil {
		bad("%v", err)
	}
	known := func(n string) bool { _, ok := b.nodes[n]; return ok }
	target := func(what, n string) {
		if n != End && !known(n) {
			bad("%s: unknown node %q", what, n)
		}
	}
	for _, from := range slices.Sorted(maps.Keys(b.edges)) {
		tos := b.edges[from]
		switch {
		case from == Start:
			if len(tos) > 1 {
				bad("more than one entry: %q", tos)
			}
			w.entry = tos[0]
			if !known(w.entry) {
				bad("entry: unknown node %q", w.entry)
			}
			continue
		case !known(from):
			bad("edge from unknown node %q", from)
			continue
		case len(tos) > 1:
			bad("node %q has %d edges (%q); use Route to choose one, or Parallel to run several", from, len(tos), tos)
		}
		target(fmt.Sprintf("edge from %q", from), tos[0])
		w.next[from] = tos[0]
	}
	if _, ok := b.edges[Start]; !ok {
		bad("no entry node: add Edge(workflow.Start, node)")
	}
	for _, from := range slices.Sorted(maps.Keys(b.routes)) {
		r := b.routes[from]
		if !known(from) {
			bad("route from unknown node %q", from)
		}
		if len(r.targets) == 0 {
			bad("route from %q names no targets", from)
		}
		for _, t := range r.targets {
			target(fmt.Sprintf("route from %q", from), t)
		}
	}
	for _, from := range slices.Sorted(maps.Keys(b.fanOuts)) {
		f := b.fanOuts[from]
		if !known(from) {
			bad("parallel step after unknown node %q", from)
		}
		if f.join == End || !known(f.join) {
			bad("parallel step after %q: unknown join node %q", from, f.join)
		}
		for _, br := range f.branches {
			switch {
			case !known(br):
				bad("parallel step after %q: unknown branch node %q", from, br)
			case w.branchOf[br] != "":
				bad("node %q is a branch of two parallel steps", br)
			case len(b.edges[br]) > 0 || b.routes[br] != nil || b.fanOuts[br] != nil:
				bad("branch node %q has edges of its own: the join runs after it", br)
			default:
				w.branchOf[br] = from
			}
		}
	}
	for _, n := range b.order {
		ways := len(b.edges[n])
		if b.routes[n] != nil {
			ways++
		}
		if b.fanOuts[n] != nil {
			ways++
		}
		if ways > 1 && len(b.edges[n]) <= 1 {
			bad("node %q has more than one way out (edge, route, parallel step): keep one", n)
		}
		if ways == 0 && w.branchOf[n] == "" {
			bad("node %q has no way out: add an edge (to workflow.End to finish there)", n)
		}
	}
	for _, n := range slices.Sorted(maps.Keys(b.maxVisits)) {
		if !known(n) {
			bad("max visits of unknown node %q", n)
		}
	}
	// A branch runs only as part of its parallel step.
	if from := w.branchOf[w.entry]; from != "" {
		bad("the entry %q is a branch of the parallel step after %q", w.entry, from)
	}
	for _, from := range slices.Sorted(maps.Keys(w.next)) {
		if p := w.branchOf[w.next[from]]; p != "" {
			bad("edge from %q to %q, a branch of the parallel step after %q", from, w.next[from], p)
		}
	}
	for _, from := range slices.Sorted(maps.Keys(b.routes)) {
		for _, t := range b.routes[from].targets {
			if p := w.branchOf[t]; p != "" {
				bad("route from %q to %q, a branch of the parallel step after %q", from, t, p)
			}
		}
	}
	for _, from := range slices.Sorted(maps.Keys(b.fanOuts)) {
		if p := w.branchOf[b.fanOuts[from].join]; p != "" {
			bad("parallel step after %q joins at %q, a branch of the parallel step after %q", from, b.fanOuts[from].join, p)
		}
	}
	if len(errs) == 0 {
		seen := map[string]bool{w.entry: true}
		queue := []string{w.entry}
		for len(queue) > 0 {
			n := queue[0]
			queue = queue[1:]
			var succ []string
			if t, ok := w.next[n]; ok {
				succ = append(succ, t)
			}
			if r := b.routes[n]; r != nil {
				succ = append(succ, r.targets...)
			}
			if f := b.fanOuts[n]; f != nil {
				succ = append(append(succ, f.branches...), f.join)
			}
			for _, s := range succ {
				if s != End && !seen[s] {
					seen[s] = true
					queue = append(queue, s)
				}
			}
		}
		for _, n := range b.order {
			if !seen[n] {
				bad("node %q cannot be reached from the entry %q", n, w.entry)
			}
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w %q: %w", ErrInvalidWorkflow, b.name, errors.Join(errs...))
	}
	return w, nil
}

// MustBuild is like Build but panics on error. It is meant for workflows
// defined at package level.
func (b *Builder[S]) MustBuild() *Workflow[S] {
	w, err := b.Build()
	if err != nil {
		panic(err)
	}
	return w
}

func (w *Workflow[S]) visitLimit(node string) int {
	if n, ok := w.maxVisits[node]; ok {
		return n
	}
	return w.opts.MaxVisits
}
