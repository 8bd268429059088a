package team_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/brokertest"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/store"
	storemem "github.com/calf-go/calf/store/memory"
	"github.com/calf-go/calf/store/storetest"
	"github.com/calf-go/calf/team"
	"github.com/calf-go/calf/tool"
	"github.com/calf-go/calf/workflow"
)

type env struct {
	rt     *agent.Runtime
	broker *memory.Broker

	mu     sync.Mutex
	events []*calf.Message
}

func newEnv(t *testing.T, wrap func(calf.Broker) calf.Broker) *env {
	t.Helper()
	mb := memory.New(&memory.Options{MaxAttempts: 3, Backoff: func(int) time.Duration { return time.Millisecond }})
	var b calf.Broker = mb
	if wrap != nil {
		b = wrap(mb)
	}
	st := storemem.New()
	c := calf.NewClient(b, nil)
	e := &env{rt: agent.NewRuntime(c, st, nil), broker: mb}
	if _, err := mb.Subscribe(t.Context(), "calf.>", func(_ context.Context, m *calf.Message) error {
		e.mu.Lock()
		e.events = append(e.events, m)
		e.mu.Unlock()
		return nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Close()
		_ = mb.Close()
		_ = st.Close()
	})
	return e
}

// published counts the distinct ids of the messages published on channels
// matching pattern.
func (e *env) published(pattern string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	seen := map[string]bool{}
	for _, m := range e.events {
		if calf.MatchChannel(pattern, m.Channel) {
			seen[m.ID] = true
		}
	}
	return len(seen)
}

func (e *env) settle(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := e.broker.Drain(ctx); err != nil {
		t.Fatalf("drain: %v", err)
	}
}

func runCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// scripted is a served text agent whose model answers the last user
// message with reply; a reply error fails the model call. It counts its
// model calls.
type scripted struct {
	agent *agent.Agent[string]
	calls atomic.Int64

	mu      sync.Mutex
	prompts []string
}

func (s *scripted) Prompts() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.prompts...)
}

func newAgent(t *testing.T, e *env, name string, reply func(prompt string) (string, error)) *scripted {
	t.Helper()
	s := &scripted{}
	m := modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
		s.calls.Add(1)
		prompt := req.Messages[len(req.Messages)-1].Text()
		s.mu.Lock()
		s.prompts = append(s.prompts, prompt)
		s.mu.Unlock()
		out, err := reply(prompt)
		if err != nil {
			return nil, err
		}
		return modeltest.Text(out), nil
	})
	a, err := agent.New(name, m, &agent.Options{Description: "the " + name})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Serve(t.Context(), e.rt, nil); err != nil {
		t.Fatal(err)
	}
	s.agent = a
	return s
}

// wrapper returns an agent that wraps its prompt in name(…).
func wrapper(t *testing.T, e *env, name string) *scripted {
	return newAgent(t, e, name, func(p string) (string, error) { return name + "(" + p + ")", nil })
}

func serve(t *testing.T, e *env, tm *team.Team) *team.Team {
	t.Helper()
	if err := tm.Serve(t.Context(), e.rt, nil); err != nil {
		t.Fatal(err)
	}
	return tm
}

func members(as ...*scripted) []team.Member {
	ms := make([]team.Member, len(as))
	for i, a := range as {
		ms[i] = team.AgentMember(a.agent)
	}
	return ms
}

func turns(tr []team.Turn) []string {
	var out []string
	for _, t := range tr {
		s := fmt.Sprintf("%d %s %s: %s", t.Step, t.Role, t.Member, t.Content)
		if t.Error != "" {
			s += " ERROR " + t.Error
		}
		out = append(out, s)
	}
	return out
}

func TestSequential(t *testing.T) {
	e := newEnv(t, nil)
	r, w, ed := wrapper(t, e, "researcher"), wrapper(t, e, "writer"), wrapper(t, e, "editor")
	tm := serve(t, e, team.Must(team.NewSequential("content", members(r, w, ed), nil)))
	out, err := tm.Run(runCtx(t), e.rt, "cats", nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := "editor(writer(researcher(cats)))"; out.Output != want {
		t.Errorf("output = %q, want %q", out.Output, want)
	}
	want := []string{
		"1 member researcher: researcher(cats)",
		"2 member writer: writer(researcher(cats))",
		"3 member editor: editor(writer(researcher(cats)))",
	}
	if diff := cmp.Diff(want, turns(out.Transcript)); diff != "" {
		t.Errorf("transcript (-want +got):\n%s", diff)
	}
	if out.Steps != 3 || out.Usage.Requests != 3 {
		t.Errorf("steps %d, usage %+v", out.Steps, out.Usage)
	}
	// Member runs are child runs of the team run.
	st, err := e.rt.LoadAgentRun(t.Context(), out.Transcript[1].RunID)
	if err != nil || st.Parent != out.RunID || st.Agent != "writer" {
		t.Errorf("member run = %+v, %v; want parent %s", st, err, out.RunID)
	}
}

func TestSequentialComesBackToAMember(t *testing.T) {
	e := newEnv(t, nil)
	w, c := wrapper(t, e, "writer"), wrapper(t, e, "critic")
	tm := serve(t, e, team.Must(team.NewSequential("draft", members(w, c, w), nil)))
	out, err := tm.Run(runCtx(t), e.rt, "cats", nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := "writer(critic(writer(cats)))"; out.Output != want || w.calls.Load() != 2 {
		t.Errorf("output = %q after %d writer runs, want %q after 2", out.Output, w.calls.Load(), want)
	}
}

func TestSequentialMemberFails(t *testing.T) {
	e := newEnv(t, nil)
	r := wrapper(t, e, "researcher")
	w := newAgent(t, e, "writer", func(string) (string, error) { return "", errors.New("writer's block") })
	ed := wrapper(t, e, "editor")
	tm := serve(t, e, team.Must(team.NewSequential("content", members(r, w, ed), nil)))
	_, err := tm.Run(runCtx(t), e.rt, "cats", &team.RunOptions{RunID: "r1"})
	want := "team content: run r1 failed: member writer (agent writer, run r1.2.writer) failed: model call failed: writer's block"
	if !errors.Is(err, agent.ErrRunFailed) || err.Error() != want {
		t.Fatalf("err = %v\nwant %s", err, want)
	}
	// Team.Wait, in any process, says the same.
	if _, err := tm.Wait(runCtx(t), e.rt, "r1"); !errors.Is(err, agent.ErrRunFailed) || err.Error() != want {
		t.Errorf("Result: %v\nwant %s", err, want)
	}
	if ed.calls.Load() != 0 {
		t.Errorf("the editor ran %d times after the writer failed", ed.calls.Load())
	}
}

func TestConcurrentMemberFailsAggregatorSeesError(t *testing.T) {
	e := newEnv(t, nil)
	a := wrapper(t, e, "optimist")
	b := newAgent(t, e, "pessimist", func(string) (string, error) { return "", errors.New("model unavailable") })
	c := wrapper(t, e, "realist")
	var seen []team.Turn
	agg := team.AggregateFunc(func(_ context.Context, task string, answers []team.Turn) (string, error) {
		seen = answers
		var parts []string
		for _, a := range answers {
			if a.Failed() {
				parts = append(parts, a.Member+" failed")
			} else {
				parts = append(parts, a.Content)
			}
		}
		return task + ": " + strings.Join(parts, "; "), nil
	})
	tm := serve(t, e, team.Must(team.NewConcurrent("panel", members(a, b, c), agg, nil)))
	out, err := tm.Run(runCtx(t), e.rt, "rain", nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := "rain: optimist(rain); pessimist failed; realist(rain)"; out.Output != want {
		t.Errorf("output = %q, want %q", out.Output, want)
	}
	if len(seen) != 3 || !seen[1].Failed() || !strings.Contains(seen[1].Error, "model unavailable") {
		t.Errorf("the aggregator saw %+v; want the pessimist's error", seen)
	}
	for _, s := range []*scripted{a, b, c} {
		if s.calls.Load() != 1 {
			t.Errorf("%s: %d model calls, want 1", s.agent.Name(), s.calls.Load())
		}
	}
	// All three ran in step 1, in parallel.
	for _, tr := range out.Transcript {
		if tr.Step != 1 {
			t.Errorf("turn %+v is not in step 1", tr)
		}
	}
}

func TestConcurrentAggregatorAgent(t *testing.T) {
	e := newEnv(t, nil)
	a := wrapper(t, e, "optimist")
	b := newAgent(t, e, "pessimist", func(string) (string, error) { return "", errors.New("model unavailable") })
	judge := newAgent(t, e, "judge", func(p string) (string, error) { return "verdict", nil })
	tm := serve(t, e, team.Must(team.NewConcurrent("panel", members(a, b), team.AggregateWith(team.AgentMember(judge.agent)), nil)))
	out, err := tm.Run(runCtx(t), e.rt, "rain", nil)
	if err != nil {
		t.Fatal(err)
	}
	if out.Output != "verdict" || out.Steps != 2 {
		t.Errorf("output %q after %d steps; want verdict after 2", out.Output, out.Steps)
	}
	p := judge.Prompts()
	if len(p) != 1 || !strings.Contains(p[0], "## optimist\noptimist(rain)") || !strings.Contains(p[0], "## pessimist (failed)\nerror: model call failed: model unavailable") {
		t.Errorf("the judge's prompt = %q", p)
	}
}

func TestConcurrentAggregatorFails(t *testing.T) {
	e := newEnv(t, nil)
	a := wrapper(t, e, "optimist")
	agg := team.AggregateFunc(func(context.Context, string, []team.Turn) (string, error) {
		return "", errors.New("cannot combine")
	})
	tm := serve(t, e, team.Must(team.NewConcurrent("panel", members(a), agg, nil)))
	_, err := tm.Run(runCtx(t), e.rt, "rain", nil)
	if !errors.Is(err, agent.ErrRunFailed) || !strings.Contains(err.Error(), "aggregator failed: cannot combine") {
		t.Fatalf("err = %v", err)
	}
}

// chatter speaks with its name and a turn number; it says DONE at its
// turn n (0 for never).
func chatter(t *testing.T, e *env, name string, doneAt int) *scripted {
	var n atomic.Int64
	return newAgent(t, e, name, func(string) (string, error) {
		k := n.Add(1)
		if int(k) == doneAt {
			return fmt.Sprintf("%s %d DONE", name, k), nil
		}
		return fmt.Sprintf("%s %d", name, k), nil
	})
}

func chatOutput(t *testing.T, out *team.Output) []string {
	t.Helper()
	var s []string
	for _, tr := range out.Transcript {
		s = append(s, string(tr.Role)+" "+tr.Member+": "+tr.Content)
	}
	return s
}

func TestGroupChatEndsOnKeyword(t *testing.T) {
	e := newEnv(t, nil)
	a, b := chatter(t, e, "alice", 0), chatter(t, e, "bob", 2)
	tm := serve(t, e, team.Must(team.NewGroupChat("chat", members(a, b), team.RoundRobin(), &team.Options{Keyword: "DONE", MaxRounds: 10})))
	out, err := tm.Run(runCtx(t), e.rt, "plan a trip", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"member alice: alice 1", "member bob: bob 1", "member alice: alice 2", "member bob: bob 2 DONE"}
	if diff := cmp.Diff(want, chatOutput(t, out)); diff != "" {
		t.Errorf("transcript (-want +got):\n%s", diff)
	}
	if out.Output != "bob 2 DONE" {
		t.Errorf("output = %q", out.Output)
	}
	// Each speaker sees the conversation so far.
	p := b.Prompts()
	if len(p) != 2 || !strings.Contains(p[1], "[alice]: alice 1\n[bob]: bob 1\n[alice]: alice 2\n") || !strings.Contains(p[1], "You are bob.") {
		t.Errorf("bob's prompts = %q", p)
	}
}

func TestGroupChatEndsAtMaxRounds(t *testing.T) {
	e := newEnv(t, nil)
	a, b := chatter(t, e, "alice", 0), chatter(t, e, "bob", 0)
	tm := serve(t, e, team.Must(team.NewGroupChat("chat", members(a, b), team.RoundRobin(), &team.Options{Keyword: "DONE", MaxRounds: 3})))
	out, err := tm.Run(runCtx(t), e.rt, "plan a trip", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"member alice: alice 1", "member bob: bob 1", "member alice: alice 2"}
	if diff := cmp.Diff(want, chatOutput(t, out)); diff != "" {
		t.Errorf("transcript (-want +got):\n%s", diff)
	}
}

func TestGroupChatEndsByFunction(t *testing.T) {
	e := newEnv(t, nil)
	a, b := chatter(t, e, "alice", 0), chatter(t, e, "bob", 0)
	stop := func(c *team.Chat) bool { return c.Last().Member == "bob" }
	tm := serve(t, e, team.Must(team.NewGroupChat("chat", members(a, b), team.RoundRobin(), &team.Options{Terminate: stop})))
	out, err := tm.Run(runCtx(t), e.rt, "plan a trip", nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"member alice: alice 1", "member bob: bob 1"}, chatOutput(t, out)); diff != "" {
		t.Errorf("transcript (-want +got):\n%s", diff)
	}
}

func TestGroupChatModeratorAgent(t *testing.T) {
	e := newEnv(t, nil)
	a, b := chatter(t, e, "alice", 0), chatter(t, e, "bob", 1)
	picks := []string{"Bob.", " alice\n", "`bob`"}
	var n atomic.Int64
	mod := newAgent(t, e, "moderator", func(string) (string, error) { return picks[n.Add(1)-1], nil })
	tm := serve(t, e, team.Must(team.NewGroupChat("chat", members(a, b), team.ModerateWith(team.AgentMember(mod.agent)), &team.Options{Keyword: "DONE"})))
	out, err := tm.Run(runCtx(t), e.rt, "plan a trip", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"moderator moderator: Bob.", "member bob: bob 1 DONE"}
	if diff := cmp.Diff(want, chatOutput(t, out)); diff != "" {
		t.Errorf("transcript (-want +got):\n%s", diff)
	}
	p := mod.Prompts()
	if len(p) != 1 || !strings.Contains(p[0], "- alice: the alice\n- bob: the bob\n") || !strings.Contains(p[0], "Reply with only the name") {
		t.Errorf("moderator prompt = %q", p)
	}
}

func TestModeratorPicksUnknownMember(t *testing.T) {
	for name, mod := range map[string]func(e *env) team.Moderator{
		"function": func(*env) team.Moderator {
			return team.ModerateFunc(func(context.Context, *team.Chat) (string, error) { return "carol", nil })
		},
		"agent": func(e *env) team.Moderator {
			return team.ModerateWith(team.AgentMember(newAgent(t, e, "moderator", func(string) (string, error) { return "carol", nil }).agent))
		},
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, nil)
			a, b := chatter(t, e, "alice", 0), chatter(t, e, "bob", 0)
			tm := serve(t, e, team.Must(team.NewGroupChat("chat", members(a, b), mod(e), nil)))
			_, err := tm.Run(runCtx(t), e.rt, "plan a trip", nil)
			if !errors.Is(err, team.ErrUnknownMember) || !errors.Is(err, agent.ErrRunFailed) {
				t.Fatalf("err = %v, want ErrUnknownMember and ErrRunFailed", err)
			}
			if msg := err.Error(); !strings.Contains(msg, `"carol"`) || !strings.Contains(msg, "alice, bob") {
				t.Errorf("error %q does not name the pick and the members", msg)
			}
			if a.calls.Load()+b.calls.Load() != 0 {
				t.Errorf("members spoke after a bad pick")
			}
		})
	}
}

func TestNestedTeam(t *testing.T) {
	e := newEnv(t, nil)
	inner := serve(t, e, team.Must(team.NewSequential("drafting", members(wrapper(t, e, "writer"), wrapper(t, e, "editor")), &team.Options{Description: "writes and edits"})))
	ed := wrapper(t, e, "publisher")
	outer := serve(t, e, team.Must(team.NewSequential("press", []team.Member{team.AgentMember(wrapper(t, e, "researcher").agent), inner, team.AgentMember(ed.agent)}, nil)))
	out, err := outer.Run(runCtx(t), e.rt, "cats", nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := "publisher(editor(writer(researcher(cats))))"; out.Output != want {
		t.Errorf("output = %q, want %q", out.Output, want)
	}
	in := out.Transcript[1]
	if in.Member != "drafting" {
		t.Fatalf("turn 2 = %+v", in)
	}
	st, err := loadTeamRun(t.Context(), e.rt, in.RunID)
	if err != nil || st.Parent != out.RunID || len(st.Transcript) != 2 {
		t.Errorf("inner run = %+v, %v", st, err)
	}
	if out.Usage.Requests != 4 {
		t.Errorf("usage = %+v, want the 4 model calls of all members", out.Usage)
	}
}

func TestInnerTeamFailureFailsOuter(t *testing.T) {
	e := newEnv(t, nil)
	bad := newAgent(t, e, "writer", func(string) (string, error) { return "", errors.New("no ink") })
	inner := serve(t, e, team.Must(team.NewSequential("drafting", members(bad), nil)))
	outer := serve(t, e, team.Must(team.NewSequential("press", []team.Member{inner}, nil)))
	_, err := outer.Run(runCtx(t), e.rt, "cats", &team.RunOptions{RunID: "r1"})
	want := "team press: run r1 failed: member drafting (team drafting, run r1.1.drafting) failed: " +
		"member writer (agent writer, run r1.1.drafting.1.writer) failed: model call failed: no ink"
	if !errors.Is(err, agent.ErrRunFailed) || err.Error() != want {
		t.Fatalf("err = %v\nwant %s", err, want)
	}
}

// Every delivery arrives twice (or every message is published twice): each
// member still runs once, each team publishes each of its events once (by
// id), and running the same run id again answers without running anyone.
func TestDuplicateDeliveriesRunEachMemberOnce(t *testing.T) {
	for name, wrap := range map[string]func(calf.Broker) calf.Broker{
		"deliveries": func(b calf.Broker) calf.Broker { return brokertest.DuplicateDeliveries(b, 2) },
		"publishes":  func(b calf.Broker) calf.Broker { return brokertest.DuplicatePublishes(b, 2) },
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, wrap)
			r, w := wrapper(t, e, "researcher"), wrapper(t, e, "writer")
			x, y := wrapper(t, e, "x"), wrapper(t, e, "y")
			a, b := chatter(t, e, "alice", 0), chatter(t, e, "bob", 2)
			agg := team.AggregateFunc(func(_ context.Context, _ string, as []team.Turn) (string, error) {
				return as[0].Content + "+" + as[1].Content, nil
			})
			inner := serve(t, e, team.Must(team.NewSequential("inner", members(w), nil)))
			carol, dave := chatter(t, e, "carol", 0), chatter(t, e, "dave", 0)
			// The moderator agent gives the floor to carol, then dave, then carol.
			mod := newAgent(t, e, "mod", func(p string) (string, error) {
				if strings.Count(p, "\n[")%2 == 0 {
					return "carol", nil
				}
				return "dave", nil
			})
			cases := []struct {
				team   *team.Team
				want   string
				steps  int
				agents []*scripted
			}{
				{serve(t, e, team.Must(team.NewSequential("seq", []team.Member{team.AgentMember(r.agent), inner}, nil))), "writer(researcher(go))", 2, []*scripted{r, w}},
				{serve(t, e, team.Must(team.NewConcurrent("panel", members(x, y), agg, nil))), "x(go)+y(go)", 1, []*scripted{x, y}},
				{serve(t, e, team.Must(team.NewGroupChat("chat", members(a, b), team.RoundRobin(), &team.Options{Keyword: "DONE"}))), "bob 2 DONE", 4, nil},
				{serve(t, e, team.Must(team.NewGroupChat("modchat", members(carol, dave), team.ModerateWith(team.AgentMember(mod.agent)), &team.Options{MaxRounds: 3}))), "carol 2", 6, nil},
			}
			for _, c := range cases {
				name := c.team.Name()
				out, err := c.team.Run(runCtx(t), e.rt, "go", &team.RunOptions{RunID: "run-" + name})
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if out.Output != c.want {
					t.Errorf("%s: output = %q, want %q", name, out.Output, c.want)
				}
				e.settle(t)
				for _, s := range c.agents {
					if s.calls.Load() != 1 {
						t.Errorf("%s: %s made %d model calls, want 1", name, s.agent.Name(), s.calls.Load())
					}
				}
				if got := e.published("calf.team." + name + ".step"); got != c.steps {
					t.Errorf("%s: %d distinct steps, want %d", name, got, c.steps)
				}
				if got := e.published("calf.team." + name + ".output"); got != 1 {
					t.Errorf("%s: %d distinct outputs, want 1", name, got)
				}
				again, err := c.team.Run(runCtx(t), e.rt, "go", &team.RunOptions{RunID: "run-" + name})
				if err != nil || again.Output != out.Output {
					t.Errorf("%s: running the run id again: %+v, %v", name, again, err)
				}
			}
			if carol.calls.Load() != 2 || dave.calls.Load() != 1 || mod.calls.Load() != 3 {
				t.Errorf("carol spoke %d times, dave %d, the moderator %d; want 2, 1, 3", carol.calls.Load(), dave.calls.Load(), mod.calls.Load())
			}
			if a.calls.Load() != 2 || b.calls.Load() != 2 {
				t.Errorf("alice spoke %d times and bob %d, want 2 each", a.calls.Load(), b.calls.Load())
			}
			e.settle(t)
			for _, s := range []*scripted{r, w, x, y} {
				if s.calls.Load() != 1 {
					t.Errorf("after running again, %s made %d model calls, want 1", s.agent.Name(), s.calls.Load())
				}
			}
		})
	}
}

func TestRunStreamTagsMemberEvents(t *testing.T) {
	e := newEnv(t, nil)
	x, y := wrapper(t, e, "x"), wrapper(t, e, "y")
	tm := serve(t, e, team.Must(team.NewSequential("pair", members(x, y), nil)))
	var got []string
	text := map[string]string{}
	var runID string
	for ev, err := range tm.RunStream(runCtx(t), e.rt, "go", nil) {
		if err != nil {
			t.Fatal(err)
		}
		runID = ev.RunID
		switch ev.Kind {
		case team.EventMember:
			if ev.Agent.Kind == agent.EventDelta {
				text[ev.Member] += ev.Agent.Delta.Text
				continue
			}
			if ev.Agent.Agent != ev.Member {
				t.Errorf("event of agent %s tagged with member %s", ev.Agent.Agent, ev.Member)
			}
			got = append(got, fmt.Sprintf("%d %s %s", ev.Step, ev.Member, ev.Agent.Kind))
		case team.EventMemberDone:
			got = append(got, fmt.Sprintf("%d %s done", ev.Step, ev.Member))
		case team.EventStep:
			got = append(got, fmt.Sprintf("step %d", ev.Step))
		default:
			got = append(got, string(ev.Kind))
		}
	}
	want := []string{
		"input", "step 1",
		"1 x input", "1 x inference", "1 x output", "1 x done",
		"step 2",
		"2 y input", "2 y inference", "2 y output", "2 y done",
		"output",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"x": "x(go)", "y": "y(x(go))"}, text); diff != "" {
		t.Errorf("streamed text (-want +got):\n%s", diff)
	}
	out, err := tm.Wait(t.Context(), e.rt, runID)
	if err != nil || out.Output != "y(x(go))" {
		t.Errorf("result = %+v, %v", out, err)
	}
}

func TestRunStreamFailure(t *testing.T) {
	e := newEnv(t, nil)
	bad := newAgent(t, e, "x", func(string) (string, error) { return "", errors.New("boom") })
	tm := serve(t, e, team.Must(team.NewSequential("pair", members(bad), nil)))
	var last team.Event
	var err error
	for ev, e := range tm.RunStream(runCtx(t), e.rt, "go", nil) {
		if e != nil {
			err = e
			break
		}
		last = ev
	}
	if last.Kind != team.EventOutput || last.Output.Status != agent.OutputFailed || !errors.Is(err, agent.ErrRunFailed) {
		t.Errorf("last event %+v, err %v", last, err)
	}
}

func TestRunCancelledWhenCallerStops(t *testing.T) {
	e := newEnv(t, nil)
	// The member is not served: the run waits for it until the caller
	// gives up.
	tm := serve(t, e, team.Must(team.NewSequential("lonely", []team.Member{team.RemoteAgent("absent", "")}, nil)))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var runID string
	for ev, err := range tm.RunStream(ctx, e.rt, "go", nil) {
		if err != nil {
			if !errors.Is(err, agent.ErrRunCancelled) {
				t.Errorf("err = %v, want ErrRunCancelled", err)
			}
			break
		}
		runID = ev.RunID
		if ev.Kind == team.EventMember && ev.Agent.Kind == agent.EventInput {
			cancel() // the member's run was submitted
		}
	}
	st, err := loadTeamRun(t.Context(), e.rt, runID)
	if err != nil || st.Status != agent.RunCancelled {
		t.Errorf("state = %+v, %v; want cancelled", st, err)
	}
}

func TestInvalidTeams(t *testing.T) {
	e := newEnv(t, nil)
	a := team.AgentMember(wrapper(t, e, "a").agent)
	for name, build := range map[string]func() (*team.Team, error){
		"bad name":      func() (*team.Team, error) { return team.NewSequential("a b", []team.Member{a}, nil) },
		"no members":    func() (*team.Team, error) { return team.NewSequential("t", nil, nil) },
		"duplicate":     func() (*team.Team, error) { return team.NewGroupChat("t", []team.Member{a, a}, team.RoundRobin(), nil) },
		"nil member":    func() (*team.Team, error) { return team.NewSequential("t", []team.Member{nil}, nil) },
		"no aggregator": func() (*team.Team, error) { return team.NewConcurrent("t", []team.Member{a}, team.Aggregator{}, nil) },
		"no moderator":  func() (*team.Team, error) { return team.NewGroupChat("t", []team.Member{a}, team.Moderator{}, nil) },
		"moderator twice": func() (*team.Team, error) {
			return team.NewGroupChat("t", []team.Member{a}, team.ModerateWith(a), nil)
		},
	} {
		if _, err := build(); !errors.Is(err, team.ErrInvalidTeam) {
			t.Errorf("%s: err = %v, want ErrInvalidTeam", name, err)
		}
	}
}

// A member's input lost with the broker's in-flight messages: Recover
// starts the member again, and the run completes.
func TestRecoverStartsLostMemberRuns(t *testing.T) {
	e := newEnv(t, nil)
	tm := serve(t, e, team.Must(team.NewSequential("content", []team.Member{team.RemoteAgent("writer", "")}, nil)))
	if _, err := tm.Submit(t.Context(), e.rt, "cats", &team.RunOptions{RunID: "run-1"}); err != nil {
		t.Fatal(err)
	}
	e.settle(t) // the writer's input found no subscriber: it is lost
	st, err := loadTeamRun(t.Context(), e.rt, "run-1")
	if err != nil || st.Status != agent.RunRunning || len(st.Current) != 1 || !st.Current[0].Started {
		t.Fatalf("state = %+v, %v", st, err)
	}
	w := wrapper(t, e, "writer")
	n, err := tm.Recover(t.Context(), e.rt, nil)
	if err != nil || n != 1 {
		t.Fatalf("recover = %d, %v; want 1", n, err)
	}
	e.settle(t)
	out, err := tm.Wait(t.Context(), e.rt, "run-1")
	if err != nil || out.Output != "writer(cats)" || w.calls.Load() != 1 {
		t.Fatalf("result = %+v, %v after %d writer calls", out, err, w.calls.Load())
	}
	if n, err := tm.Recover(t.Context(), e.rt, nil); err != nil || n != 0 {
		t.Errorf("recover after the end = %d, %v; want 0", n, err)
	}
}

// The members, the coordinator and the caller are three processes on one
// broker and one store: the team works through events alone.
func TestMembersCoordinatorAndCallerOnDifferentWorkers(t *testing.T) {
	e := newEnv(t, nil) // the members' worker
	coordinator := agent.NewRuntime(calf.NewClient(e.rt.Client().Broker(), nil), e.rt.Store(), nil)
	caller := agent.NewRuntime(calf.NewClient(e.rt.Client().Broker(), nil), e.rt.Store(), nil)
	t.Cleanup(func() {
		_ = coordinator.Client().Close()
		_ = caller.Client().Close()
	})
	wrapper(t, e, "writer")
	wrapper(t, e, "editor")
	// The coordinator knows the members by name only.
	tm := team.Must(team.NewSequential("content", []team.Member{team.RemoteAgent("writer", ""), team.RemoteAgent("editor", "")}, nil))
	if err := tm.Serve(t.Context(), coordinator, nil); err != nil {
		t.Fatal(err)
	}
	out, err := tm.Run(runCtx(t), caller, "cats", nil)
	if err != nil || out.Output != "editor(writer(cats))" {
		t.Fatalf("output = %+v, %v", out, err)
	}
}

// A manager delegates to its members through subagent tools (agents as
// tools) and synthesizes their answers.
func TestHierarchical(t *testing.T) {
	e := newEnv(t, nil)
	web, papers := wrapper(t, e, "web"), wrapper(t, e, "papers")
	var managerCalls atomic.Int64
	manager := agent.Must(agent.New("lead", modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
		managerCalls.Add(1)
		last := req.Messages[len(req.Messages)-1]
		if last.Role != model.RoleTool {
			return modeltest.ToolCalls(
				modeltest.Call("c1", "web", `{"input":"search cats"}`),
				modeltest.Call("c2", "papers", `{"input":"find cat papers"}`),
			), nil
		}
		var results []string
		for _, m := range req.Messages {
			if m.Role == model.RoleTool {
				results = append(results, m.Text())
			}
		}
		return modeltest.Text("report: " + strings.Join(results, " & ")), nil
	}), &agent.Options{Description: "leads the research"}))
	for _, sub := range []*scripted{web, papers} {
		if err := manager.AddSubagent(sub.agent, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := manager.Serve(t.Context(), e.rt, nil); err != nil {
		t.Fatal(err)
	}
	tm := serve(t, e, team.Must(team.NewHierarchical("research", team.AgentMember(manager), members(web, papers), nil)))
	var subEvents []string
	var runID string
	for ev, err := range tm.RunStream(runCtx(t), e.rt, "cats", nil) {
		if err != nil {
			t.Fatal(err)
		}
		runID = ev.RunID
		if ev.Kind == team.EventMember && (ev.Agent.Kind == agent.EventSubagentSpawned || ev.Agent.Kind == agent.EventSubagentCompleted) {
			subEvents = append(subEvents, fmt.Sprintf("%d %s %s %s %s", ev.Step, ev.Member, ev.Agent.Kind, ev.Agent.Subagent.Agent, ev.Agent.Subagent.ToolCallID))
		}
		if ev.Kind == team.EventMember && ev.Agent.Kind == agent.EventOutput && ev.Agent.Agent != "lead" {
			subEvents = append(subEvents, fmt.Sprintf("%d %s %s", ev.Step, ev.Member, ev.Agent.Agent))
		}
	}
	out, err := tm.Wait(t.Context(), e.rt, runID)
	if err != nil {
		t.Fatal(err)
	}
	if want := "report: web(search cats) & papers(find cat papers)"; out.Output != want {
		t.Errorf("output = %q, want %q", out.Output, want)
	}
	if len(out.Transcript) != 1 || out.Transcript[0].Role != team.RoleManager || managerCalls.Load() != 2 {
		t.Errorf("transcript %+v after %d manager calls", out.Transcript, managerCalls.Load())
	}
	slices.Sort(subEvents)
	// The subagents' events are tagged with the member that started them.
	want := []string{
		"1 lead papers", "1 lead subagent_completed papers c2", "1 lead subagent_completed web c1",
		"1 lead subagent_spawned papers c2", "1 lead subagent_spawned web c1", "1 lead web",
	}
	if diff := cmp.Diff(want, subEvents); diff != "" {
		t.Errorf("subagent outputs (-want +got):\n%s", diff)
	}
	// The manager's two model calls, and one of each subagent it called.
	if out.Usage.Requests != 4 {
		t.Errorf("usage = %+v; want the manager's 2 model calls and its 2 subagents' 1 each", out.Usage)
	}
}

// A swarm's entry agent hands the conversation off; the team's answer is
// the answer of the agent that ends the chain.
func TestSwarm(t *testing.T) {
	e := newEnv(t, nil)
	billing := newAgent(t, e, "billing", func(string) (string, error) { return "invoice resent", nil })
	transfer := tool.Must(agent.Handoff(billing.agent, nil))
	triage := agent.Must(agent.New("triage",
		modeltest.NewTestModel(modeltest.ToolCalls(modeltest.Call("c1", "transfer_to_billing", `{}`))),
		&agent.Options{Tools: []tool.Tool{transfer}}))
	if err := triage.Serve(t.Context(), e.rt, nil); err != nil {
		t.Fatal(err)
	}
	tm := serve(t, e, team.Must(team.NewSwarm("desk", team.AgentMember(triage), members(billing), nil)))
	out, err := tm.Run(runCtx(t), e.rt, "where is my invoice?", nil)
	if err != nil {
		t.Fatal(err)
	}
	if out.Output != "invoice resent" {
		t.Errorf("output = %q", out.Output)
	}
	if tr := out.Transcript; len(tr) != 1 || tr[0].Member != "triage" || tr[0].Role != team.RoleEntry || tr[0].AnsweredBy != "billing" {
		t.Errorf("transcript = %+v", tr)
	}
}

func FuzzDecodeRunInfo(f *testing.F) {
	f.Add([]byte(`{"run_id":"r","team":"t","process":"sequential","status":"running","step":1,"calls":[{"member":"a","role":"member","run_id":"r.1.a"}]}`))
	f.Add([]byte(`{"run_id":"r","team":"t","status":"bogus"}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := team.DecodeRunInfo(data)
		if err != nil {
			if !errors.Is(err, agent.ErrCorruptState) {
				t.Errorf("error %v does not match ErrCorruptState", err)
			}
			return
		}
		if st.ID == "" || st.Team == "" || st.Step < 0 {
			t.Errorf("accepted %+v", st)
		}
	})
}

func TestRunStreamTagsNestedTeamEvents(t *testing.T) {
	e := newEnv(t, nil)
	inner := serve(t, e, team.Must(team.NewSequential("drafting", members(wrapper(t, e, "writer")), nil)))
	outer := serve(t, e, team.Must(team.NewSequential("press", []team.Member{team.AgentMember(wrapper(t, e, "researcher").agent), inner}, nil)))
	var got []string
	for ev, err := range outer.RunStream(runCtx(t), e.rt, "cats", nil) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Kind == team.EventMember && ev.Agent.Kind == agent.EventOutput {
			got = append(got, fmt.Sprintf("%d %s %s", ev.Step, ev.Member, ev.Agent.Agent))
		}
	}
	if diff := cmp.Diff([]string{"1 researcher researcher", "2 drafting writer"}, got); diff != "" {
		t.Errorf("agent outputs (-want +got):\n%s", diff)
	}
}

// A member that hangs is cut at Options.MemberTimeout: the aggregator
// sees its error, and the team answers.
func TestConcurrentMemberTimeout(t *testing.T) {
	e := newEnv(t, nil)
	fast := wrapper(t, e, "fast")
	slow := agent.Must(agent.New("slow", modeltest.FunctionModel(func(ctx context.Context, _ *model.Request) (*model.Response, error) {
		<-ctx.Done() // hangs until the deadline cuts the call
		return nil, ctx.Err()
	}), nil))
	if err := slow.Serve(t.Context(), e.rt, nil); err != nil {
		t.Fatal(err)
	}
	agg := team.AggregateFunc(func(_ context.Context, _ string, as []team.Turn) (string, error) {
		return fmt.Sprintf("%s | %s failed: %v", as[0].Content, as[1].Member, as[1].Failed()), nil
	})
	tm := serve(t, e, team.Must(team.NewConcurrent("panel", []team.Member{team.AgentMember(fast.agent), team.AgentMember(slow)}, agg,
		&team.Options{MemberTimeout: 50 * time.Millisecond})))
	out, err := tm.Run(runCtx(t), e.rt, "go", nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := "fast(go) | slow failed: true"; out.Output != want {
		t.Errorf("output = %q, want %q", out.Output, want)
	}
	if tr := out.Transcript[1]; tr.Error == "" {
		t.Errorf("slow's turn = %+v", tr)
	}
}

type draft struct {
	Text string `json:"text"`
}

// A workflow is a member like an agent: its run is a child run, and its
// final state becomes text.
func TestWorkflowMember(t *testing.T) {
	e := newEnv(t, nil)
	x := wrapper(t, e, "x")
	polish := workflow.New[draft]("polish", nil).
		Node("shout", workflow.Func(func(_ context.Context, d draft) (draft, error) {
			d.Text = strings.ToUpper(d.Text) + "!"
			return d, nil
		})).
		Node("review", workflow.AgentNode(wrapper(t, e, "reviewer").agent,
			func(d draft) (string, error) { return d.Text, nil },
			func(d draft, out string) (draft, error) { d.Text = out; return d, nil })).
		Edge(workflow.Start, "shout").Edge("shout", "review").Edge("review", workflow.End).
		MustBuild()
	if err := polish.Serve(t.Context(), e.rt, nil); err != nil {
		t.Fatal(err)
	}
	member := team.WorkflowMember(polish, "polishes a draft",
		func(p string) (draft, error) { return draft{Text: p}, nil },
		func(d draft) (string, error) { return d.Text, nil })
	tm := serve(t, e, team.Must(team.NewSequential("pipeline", []team.Member{team.AgentMember(x.agent), member}, nil)))
	var runID string
	var workflowEvents int
	for ev, err := range tm.RunStream(runCtx(t), e.rt, "go", nil) {
		if err != nil {
			t.Fatal(err)
		}
		runID = ev.RunID
		if ev.Kind == team.EventMember && ev.Agent.Agent == "polish" {
			workflowEvents++
		}
	}
	out, err := tm.Wait(t.Context(), e.rt, runID)
	if err != nil || out.Output != "reviewer(X(GO)!)" {
		t.Fatalf("result = %+v, %v", out, err)
	}
	if workflowEvents == 0 {
		t.Error("the stream showed none of the workflow's events")
	}
}

// A member run held up by a parked message holds up the team run: the
// caller hears of it at once, through Run and through RunStream.
func TestMemberParkedMessage(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%t", stream), func(t *testing.T) {
			e := newEnv(t, nil)
			faulty := storetest.WithFaults(e.rt.Store(), storetest.Faults{Kinds: []string{store.KindRun}, WriteFailRate: 1})
			m := modeltest.FunctionModel(func(context.Context, *model.Request) (*model.Response, error) {
				return modeltest.Text("never"), nil
			})
			a := agent.Must(agent.New("writer", m, nil))
			if err := a.Serve(t.Context(), agent.NewRuntime(e.rt.Client(), faulty, nil), nil); err != nil {
				t.Fatal(err)
			}
			tm := serve(t, e, team.Must(team.NewSequential("content", []team.Member{team.AgentMember(a)}, nil)))
			ctx := runCtx(t)
			var err error
			if stream {
				for _, e := range tm.RunStream(ctx, e.rt, "cats", &team.RunOptions{RunID: "t1"}) {
					if e != nil {
						err = e
					}
				}
			} else {
				_, err = tm.Run(ctx, e.rt, "cats", &team.RunOptions{RunID: "t1"})
			}
			var re *agent.RunError
			if !errors.Is(err, agent.ErrRunParked) || !errors.As(err, &re) {
				t.Fatalf("err = %v, want an *agent.RunError matching ErrRunParked", err)
			}
			if ctx.Err() != nil {
				t.Fatal("the caller heard of it only at its deadline")
			}
			if re.Kind != "team" || re.Name != "content" || re.RunID != "t1" || re.Parked.Group != agent.InputChannel("writer") || !strings.HasPrefix(re.Parked.Message.Metadata.RunID, "t1.") {
				t.Errorf("RunError = %+v, parked %+v", re, re.Parked)
			}
		})
	}
}

// Cancelling a team run cancels its member runs in flight: a member agent
// whose model call is in progress takes no step after it.
func TestCancelCancelsMemberRuns(t *testing.T) {
	e := newEnv(t, nil)
	started, release := make(chan struct{}, 1), make(chan struct{})
	var calls atomic.Int64
	m := modeltest.FunctionModel(func(ctx context.Context, _ *model.Request) (*model.Response, error) {
		calls.Add(1)
		started <- struct{}{}
		<-release
		return modeltest.Text("too late"), nil
	})
	slow := agent.Must(agent.New("slow", m, nil))
	if err := slow.Serve(t.Context(), e.rt, nil); err != nil {
		t.Fatal(err)
	}
	tm := serve(t, e, team.Must(team.NewSequential("patient", []team.Member{team.AgentMember(slow)}, nil)))
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		<-started
		cancel() // the member's model call is in progress
	}()
	if _, err := tm.Run(ctx, e.rt, "go", &team.RunOptions{RunID: "t1"}); !errors.Is(err, agent.ErrRunCancelled) {
		t.Fatalf("err = %v, want ErrRunCancelled", err)
	}
	close(release)
	e.settle(t)
	st, err := e.rt.LoadAgentRun(t.Context(), "t1.1.slow")
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != agent.RunCancelled || !strings.Contains(st.Error, "team patient: run t1 was cancelled") {
		t.Errorf("member run: status %s, error %q; want cancelled by the team", st.Status, st.Error)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("the member's model was called %d times, want 1", n)
	}
}
