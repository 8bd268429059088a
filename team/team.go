package team

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/internal/runlife"
)

// Process is how a team's members work together.
type Process string

// Processes.
const (
	// Sequential: each member's output is the next member's input; the
	// last member's output is the team's.
	Sequential Process = "sequential"
	// Concurrent: every member works on the task at once; an aggregator
	// combines their answers, failures included.
	Concurrent Process = "concurrent"
	// Hierarchical: a manager agent delegates to the members, which it
	// calls as tools, and answers.
	Hierarchical Process = "hierarchical"
	// Swarm: an entry agent takes the task, and the agents hand it to each
	// other by their own judgment.
	Swarm Process = "swarm"
	// GroupChat: a moderator picks the next speaker each round, until a
	// termination condition holds.
	GroupChat Process = "group_chat"
)

// Defaults of [Options].
const (
	DefaultTimeout   = 30 * time.Minute
	DefaultMaxRounds = 10
)

// Options configures a [Team]. A nil *Options means the defaults.
type Options struct {
	// Description says what the team does, for a parent team or a person.
	Description string
	// Timeout bounds a run as seen by Run and RunStream: when it passes,
	// the run is cancelled. Default: DefaultTimeout.
	Timeout time.Duration

	// MemberTimeout, when set, bounds each agent member's run: a run still
	// going when it passes ends with an error at its next step (its model
	// and tool calls are cut at the deadline), which the team handles like
	// any failed member (a concurrent team's aggregator sees the error).
	// Default: only the members' own bounds.
	MemberTimeout time.Duration

	// MaxRounds bounds the speaker turns of a group chat. Default:
	// DefaultMaxRounds.
	MaxRounds int
	// Keyword ends a group chat after a turn whose content contains it.
	Keyword string
	// Terminate ends a group chat when it returns true after a turn.
	Terminate func(chat *Chat) bool
	// Prompt builds a group-chat speaker's input. Default: [ChatPrompt].
	Prompt func(chat *Chat, speaker Member) string

	// Flow, when set, holds the team's runs to limits per key across
	// every process that serves it: concurrency, rate, debounce and
	// priority (see [agent.FlowControl]). Default: none.
	Flow *agent.FlowControl
}

// Errors of a team.
var (
	// ErrInvalidTeam is returned for a team that cannot be built.
	ErrInvalidTeam = errors.New("team: invalid team")
	// ErrUnknownMember is the error of a run whose moderator picked a
	// speaker that is not a member. A run that fails so returns an error
	// matching it.
	ErrUnknownMember = errors.New("team: unknown member")
)

// Team is a set of members and the process by which they work on a task.
// It does nothing by itself: [Team.Serve] turns it into a coordinator, a
// set of handlers on the calf.team.{name}.* channels, and [Team.Run],
// [Team.RunStream] and [Team.Submit] start runs that the coordinator
// carries out, in this process or on any worker that serves the team.
//
// Every step of a run is an event, and the run's state (step, transcript,
// pending member runs, results) lives in the store: members run as child
// runs that reply on the team's channel, and no goroutine waits for them.
// A team is itself a [Member], so a team can be a member of another.
type Team struct {
	name    string
	process Process
	opts    Options
	members []Member
	byName  map[string]Member

	aggregator Aggregator
	moderator  Moderator
	lead       Member // the manager or the swarm's entry agent

	// served records the runtimes the team is served on (see onDemand).
	served runlife.Served[*agent.Runtime]
}

// Aggregator combines the answers of a concurrent team's members: a
// function ([AggregateFunc]) or an agent ([AggregateWith]).
type Aggregator struct {
	fn    func(ctx context.Context, task string, answers []Turn) (string, error)
	agent Member
}

// AggregateFunc returns an aggregator that calls fn with the task and the
// members' answers, in the order of the members; an answer whose Error is
// set is a member that failed. fn's result is the team's output; its error
// fails the run. fn runs inside the coordinator's handler and may run
// again if the handler's message is delivered again, so it should only
// decide, not act.
func AggregateFunc(fn func(ctx context.Context, task string, answers []Turn) (string, error)) Aggregator {
	return Aggregator{fn: fn}
}

// AggregateWith returns an aggregator that asks m (an agent or a team) to
// combine the answers: its input is [AggregatePrompt], its output the
// team's.
func AggregateWith(m Member) Aggregator { return Aggregator{agent: m} }

// Moderator picks the next speaker of a group chat: a function
// ([ModerateFunc], [RoundRobin]) or an agent ([ModerateWith]).
type Moderator struct {
	fn    func(ctx context.Context, chat *Chat) (string, error)
	agent Member
}

// ModerateFunc returns a moderator that calls fn with the chat so far; fn
// returns the name of the next speaker. A name that is not a member's fails
// the run with an error matching [ErrUnknownMember]; fn's error fails it
// too. Like [AggregateFunc], fn should only decide.
func ModerateFunc(fn func(ctx context.Context, chat *Chat) (string, error)) Moderator {
	return Moderator{fn: fn}
}

// ModerateWith returns a moderator that asks m, each round, to name the
// next speaker: its input is [ModeratorPrompt], and its output must be a
// member's name (spaces, quotes and a final period are ignored, and so is
// case). Anything else fails the run with an error matching
// [ErrUnknownMember].
func ModerateWith(m Member) Moderator { return Moderator{agent: m} }

// RoundRobin returns a moderator that gives the members the floor in turn.
func RoundRobin() Moderator {
	return ModerateFunc(func(_ context.Context, c *Chat) (string, error) {
		return c.Members[len(c.Turns)%len(c.Members)], nil
	})
}

// Chat is a group chat as a moderator, a prompt builder or a termination
// function sees it.
type Chat struct {
	Team string
	Task string
	// Members are the members' names, in the team's order.
	Members []string
	// Turns are the speakers' turns so far, oldest first.
	Turns []Turn
}

// Last returns the last turn, or nil before the first.
func (c *Chat) Last() *Turn {
	if len(c.Turns) == 0 {
		return nil
	}
	return &c.Turns[len(c.Turns)-1]
}

var nameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// NewSequential returns a team whose members work one after the other:
// the task goes to the first, each member's output is the next one's
// input, and the last one's output is the team's. A member may appear more
// than once (writer, critic, writer). A member that fails fails the run.
func NewSequential(name string, members []Member, opts *Options) (*Team, error) {
	return build(name, Sequential, members, opts, func(t *Team) error {
		if len(members) == 0 {
			return errors.New("no members")
		}
		return nil
	})
}

// NewConcurrent returns a team whose members all work on the task at once,
// as parallel child runs; agg combines their answers into the team's
// output. A member that fails does not fail the run: the aggregator sees
// its error.
func NewConcurrent(name string, members []Member, agg Aggregator, opts *Options) (*Team, error) {
	return build(name, Concurrent, members, opts, func(t *Team) error {
		switch {
		case len(members) == 0:
			return errors.New("no members")
		case agg.fn == nil && agg.agent == nil:
			return errors.New("no aggregator: use AggregateFunc or AggregateWith")
		}
		t.aggregator = agg
		return t.add(agg.agent)
	})
}

// NewGroupChat returns a team whose members speak in rounds: each round
// mod picks a speaker, who sees the task and the conversation so far (see
// Options.Prompt). The chat ends after a turn that contains
// Options.Keyword, when Options.Terminate says so, or after
// Options.MaxRounds turns; the last turn's content is the team's output.
// A speaker that fails fails the run.
func NewGroupChat(name string, members []Member, mod Moderator, opts *Options) (*Team, error) {
	return build(name, GroupChat, members, opts, func(t *Team) error {
		switch {
		case len(members) == 0:
			return errors.New("no members")
		case mod.fn == nil && mod.agent == nil:
			return errors.New("no moderator: use ModerateFunc, RoundRobin or ModerateWith")
		}
		t.moderator = mod
		return t.add(mod.agent)
	})
}

// NewHierarchical returns a team led by manager, an agent that delegates
// to the members by calling them as tools and then answers the task; its
// answer is the team's. Give the manager one subagent tool per member
// before serving it ([agent.Agent.AddSubagent] or [agent.AsTool]): each
// call is a child run of the member, whose output comes back to the
// manager as the tool's result, so no goroutine waits for it. members
// lists the subordinates, for the team's description; the team itself runs
// only the manager, whose failure fails the run. Subagents' events appear
// in [Team.RunStream] under the manager's name.
func NewHierarchical(name string, manager Member, members []Member, opts *Options) (*Team, error) {
	return build(name, Hierarchical, members, opts, func(t *Team) error {
		if manager == nil {
			return errors.New("no manager")
		}
		t.lead = manager
		return t.add(manager)
	})
}

// NewSwarm returns a team whose entry agent takes the task; the agents
// then hand the conversation to each other by their own judgment, through
// handoff tools ([agent.Handoff]: give each agent a tool for each agent it
// may hand off to, before serving it). The answer of the agent that ends
// the chain is the team's, and [Turn.AnsweredBy] names that agent. members
// lists the agents of the swarm, for the team's description; the entry
// agent may be one of them.
func NewSwarm(name string, entry Member, members []Member, opts *Options) (*Team, error) {
	return build(name, Swarm, members, opts, func(t *Team) error {
		if entry == nil {
			return errors.New("no entry agent")
		}
		t.lead = entry
		if t.byName[entry.Name()] != nil {
			return nil // the entry agent is one of the members
		}
		return t.add(entry)
	})
}

func build(name string, p Process, members []Member, opts *Options, check func(t *Team) error) (*Team, error) {
	t := &Team{name: name, process: p, byName: map[string]Member{}}
	if opts != nil {
		t.opts = *opts
	}
	if t.opts.Timeout <= 0 {
		t.opts.Timeout = DefaultTimeout
	}
	if t.opts.MaxRounds <= 0 {
		t.opts.MaxRounds = DefaultMaxRounds
	}
	if t.opts.Prompt == nil {
		t.opts.Prompt = ChatPrompt
	}
	if !nameRE.MatchString(name) {
		return nil, fmt.Errorf("%w: name %q must match %s", ErrInvalidTeam, name, nameRE)
	}
	if opts != nil {
		if err := opts.Flow.Check(); err != nil {
			return nil, fmt.Errorf("%w %s: %w", ErrInvalidTeam, name, err)
		}
	}
	for _, m := range members {
		if m == nil {
			return nil, fmt.Errorf("%w %s: a member is nil", ErrInvalidTeam, name)
		}
		// A sequential team may come back to a member (writer, critic,
		// writer): its runs differ by step.
		if p != Sequential || t.byName[m.Name()] == nil {
			if err := t.add(m); err != nil {
				return nil, err
			}
		}
		t.members = append(t.members, m)
	}
	if err := check(t); err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrInvalidTeam, name, err)
	}
	return t, nil
}

// add registers a member, a moderator, an aggregator or a lead by name.
func (t *Team) add(m Member) error {
	if m == nil {
		return nil
	}
	n := m.Name()
	switch {
	case !nameRE.MatchString(n):
		return fmt.Errorf("%w %s: member name %q must match %s", ErrInvalidTeam, t.name, n, nameRE)
	case t.byName[n] != nil:
		return fmt.Errorf("%w %s: two members are named %q", ErrInvalidTeam, t.name, n)
	}
	t.byName[n] = m
	return nil
}

// Name returns the team's name.
func (t *Team) Name() string { return t.name }

// Description returns the team's description.
func (t *Team) Description() string { return t.opts.Description }

// Process returns the team's process.
func (t *Team) Process() Process { return t.process }

// Members returns the team's members, in order.
func (t *Team) Members() []Member { return slices.Clone(t.members) }

// kindOf says what the participant named name is (a member, the lead,
// an aggregator or moderator agent), for errors.
func (t *Team) kindOf(name string) string {
	for _, m := range []Member{t.byName[name], t.lead, t.aggregator.agent, t.moderator.agent} {
		if m != nil && m.Name() == name {
			return kindOf(m)
		}
	}
	return "member"
}

func (t *Team) memberNames() []string {
	names := make([]string, len(t.members))
	for i, m := range t.members {
		names[i] = m.Name()
	}
	return names
}

func (t *Team) chat(st *runState) *Chat {
	c := &Chat{Team: t.name, Task: st.Task, Members: t.memberNames()}
	for _, turn := range st.Transcript {
		if turn.Role == RoleMember {
			c.Turns = append(c.Turns, turn)
		}
	}
	return c
}

// ChatPrompt is the default input of a group-chat speaker: the task, the
// conversation so far, and who the speaker is.
func ChatPrompt(chat *Chat, speaker Member) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Task: %s\n\n", chat.Task)
	writeConversation(&b, chat.Turns)
	fmt.Fprintf(&b, "You are %s. Write your next contribution to the conversation.", speaker.Name())
	return b.String()
}

// ModeratorPrompt is the input of a moderator agent: the task, the
// members and what they do, the conversation so far, and the request to
// name the next speaker.
func ModeratorPrompt(chat *Chat, members []Member) string {
	var b strings.Builder
	fmt.Fprintf(&b, "You moderate the team %s.\n\nTask: %s\n\nMembers:\n", chat.Team, chat.Task)
	for _, m := range members {
		if d := m.Description(); d != "" {
			fmt.Fprintf(&b, "- %s: %s\n", m.Name(), d)
		} else {
			fmt.Fprintf(&b, "- %s\n", m.Name())
		}
	}
	b.WriteString("\n")
	writeConversation(&b, chat.Turns)
	b.WriteString("Reply with only the name of the member who should speak next.")
	return b.String()
}

// AggregatePrompt is the input of an aggregator agent: the task and every
// member's answer or error.
func AggregatePrompt(task string, answers []Turn) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Task: %s\n\nThe team members answered:\n", task)
	for _, a := range answers {
		if a.Failed() {
			fmt.Fprintf(&b, "\n## %s (failed)\nerror: %s\n", a.Member, a.Error)
		} else {
			fmt.Fprintf(&b, "\n## %s\n%s\n", a.Member, a.Content)
		}
	}
	b.WriteString("\nCombine these answers into one answer to the task.")
	return b.String()
}

func writeConversation(b *strings.Builder, turns []Turn) {
	if len(turns) == 0 {
		b.WriteString("The conversation has not started.\n\n")
		return
	}
	b.WriteString("Conversation so far:\n")
	for _, t := range turns {
		fmt.Fprintf(b, "[%s]: %s\n", t.Member, t.Content)
	}
	b.WriteString("\n")
}

// start plans the first step of a new run.
func (t *Team) start(ctx context.Context, st *runState, now time.Time) error {
	switch t.process {
	case Sequential:
		st.plan(memberCall{Member: t.members[0].Name(), Role: RoleMember, Prompt: st.Task})
	case Concurrent:
		calls := make([]memberCall, len(t.members))
		for i, m := range t.members {
			calls[i] = memberCall{Member: m.Name(), Role: RoleMember, Prompt: st.Task}
		}
		st.plan(calls...)
	case Hierarchical:
		st.plan(memberCall{Member: t.lead.Name(), Role: RoleManager, Prompt: st.Task})
	case Swarm:
		st.plan(memberCall{Member: t.lead.Name(), Role: RoleEntry, Prompt: st.Task})
	case GroupChat:
		return t.nextSpeaker(ctx, st, now)
	default:
		st.fail(fmt.Sprintf("unknown process %q", t.process), now)
	}
	return nil
}

// advance decides what follows a step whose calls have all answered: the
// next step, the output, or a failure. It returns an error only when ctx
// ended, so that the handler's message is delivered again.
func (t *Team) advance(ctx context.Context, st *runState, now time.Time) error {
	for _, c := range st.Calls {
		st.Transcript = append(st.Transcript, Turn{Step: st.Step, Member: c.Member, Role: c.Role, RunID: c.RunID, Content: c.Output, Error: c.Error, AnsweredBy: c.AnsweredBy})
	}
	calls := st.Calls
	last := calls[len(calls)-1]
	if len(calls) == 1 && last.Error != "" && !(t.process == Concurrent && last.Role == RoleMember) {
		st.fail(fmt.Sprintf("%s %s (%s %s, run %s) failed: %s", last.Role, last.Member, t.kindOf(last.Member), last.Member, last.RunID, last.Error), now)
		return nil
	}
	switch t.process {
	case Sequential:
		next := len(st.Transcript)
		if next == len(t.members) {
			st.complete(last.Output, now)
			return nil
		}
		st.plan(memberCall{Member: t.members[next].Name(), Role: RoleMember, Prompt: last.Output})
	case Concurrent:
		if last.Role == RoleAggregator {
			st.complete(last.Output, now)
			return nil
		}
		answers := slices.Clone(st.Transcript)
		if t.aggregator.fn == nil {
			st.plan(memberCall{Member: t.aggregator.agent.Name(), Role: RoleAggregator, Prompt: AggregatePrompt(st.Task, answers)})
			return nil
		}
		out, err := t.aggregator.fn(ctx, st.Task, answers)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			st.fail("aggregator failed: "+err.Error(), now)
			return nil
		}
		st.complete(out, now)
	case Hierarchical, Swarm:
		st.complete(last.Output, now)
	case GroupChat:
		if last.Role == RoleModerator {
			return t.callSpeaker(st, strings.Trim(strings.TrimSpace(last.Output), "\"'`*."), now)
		}
		chat := t.chat(st)
		switch {
		case t.opts.Keyword != "" && strings.Contains(last.Output, t.opts.Keyword),
			t.opts.Terminate != nil && t.opts.Terminate(chat),
			len(chat.Turns) >= t.opts.MaxRounds:
			st.complete(last.Output, now)
			return nil
		}
		return t.nextSpeaker(ctx, st, now)
	}
	return nil
}

// nextSpeaker plans the next round of a group chat: a call of the
// moderator agent, or the speaker the moderator function picks.
func (t *Team) nextSpeaker(ctx context.Context, st *runState, now time.Time) error {
	chat := t.chat(st)
	if m := t.moderator.agent; m != nil {
		st.plan(memberCall{Member: m.Name(), Role: RoleModerator, Prompt: ModeratorPrompt(chat, t.members)})
		return nil
	}
	name, err := t.moderator.fn(ctx, chat)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		st.fail("moderator failed: "+err.Error(), now)
		return nil
	}
	return t.callSpeaker(st, name, now)
}

func (t *Team) callSpeaker(st *runState, name string, now time.Time) error {
	for _, m := range t.members {
		if strings.EqualFold(m.Name(), name) {
			st.plan(memberCall{Member: m.Name(), Role: RoleMember, Prompt: t.opts.Prompt(t.chat(st), m)})
			return nil
		}
	}
	st.fail(fmt.Sprintf("%s: the moderator picked %q, which is not a member of team %s; the members are: %s",
		ErrUnknownMember.Error(), name, t.name, strings.Join(t.memberNames(), ", ")), now)
	return nil
}

// Must is like the constructors but panics on error. It is meant for teams
// defined at package level: team.Must(team.NewSequential(…)).
func Must(t *Team, err error) *Team {
	if err != nil {
		panic(err)
	}
	return t
}

// stampDeadlines gives the calls of a newly planned step their deadline.
func (t *Team) stampDeadlines(st *runState, now time.Time) {
	if t.opts.MemberTimeout <= 0 || st.Status.Terminal() {
		return
	}
	for i := range st.Calls {
		if st.Calls[i].Deadline.IsZero() {
			st.Calls[i].Deadline = now.Add(t.opts.MemberTimeout)
		}
	}
}
