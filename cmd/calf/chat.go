package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"charm.land/bubbles/v2/textinput"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/spf13/cobra"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/agent/approval"
	"github.com/calf-go/calf/agent/session"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/server"
	"github.com/calf-go/calf/store"
)

// envChatLog names a file where calf chat writes what it handles (keys,
// the run's events, answers to approvals), for reporting a bug: the screen
// is bubbletea's, so nothing can be printed to it.
const envChatLog = "CALF_CHAT_LOG"

type chatFlags struct {
	agentFlags
	store   string
	session string
	// conversation, broker and user are --conversation, --broker and
	// --user: the chat talks in a conversation (chatconv.go).
	conversation string
	broker       string
	user         string
	// retention: see registerRetention.
	retention time.Duration
}

func newChatCommand(getenv func(string) string) *cobra.Command {
	var f chatFlags
	cmd := &cobra.Command{
		Use:   "chat",
		Short: "Chat with the agent in the terminal",
		Long: `calf chat is a conversation with the agent in the terminal: the answer streams as the
model writes it, tool calls and their results are shown as they happen, and a call that
needs approval (--mode) is asked about in place: y allows it, n denies it, a allows the
tool for the rest of the session. Ctrl+C or Esc stops the answer in progress; Ctrl+C
with nothing running, Ctrl+D or /quit leaves.

With --conversation ID it talks in a conversation (calf conversations create)
instead: each line is the user's message to the conversation's entry agent,
the answers are shown as they come back, and the exchanges so far are shown
first. With --broker, the workers' broker, calf worker --agents serves the
conversation; without it, this process does, on the prototypes registered
in --store (--agents FILE registers a file's first). /quit leaves.

The conversation is a session kept in --store: --session ID resumes one. Commands:
  /new              start a new session
  /sessions         list the sessions, newest first
  /resume ID        continue the session ID
  /fork             continue in a copy of this session
  /cost             the session's tokens and cost
  /model [MODEL]    show the model, or switch to MODEL
  /help, /quit`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return chat(cmd, &f, getenv)
		},
	}
	fl := cmd.Flags()
	f.register(fl)
	f.registerAgents(fl, true)
	fl.StringVar(&f.store, "store", defaultStore, storeHelp)
	fl.StringVar(&f.session, "session", "", "resume the session with this id (default: a new one)")
	fl.StringVar(&f.conversation, "conversation", "", "talk in the conversation of this `ID` (calf conversations list) instead of a session")
	fl.StringVar(&f.broker, "broker", "", "with --conversation, "+brokerHelp+"; the workers' (calf worker --agents), or none to serve the conversation in this process")
	fl.StringVar(&f.user, "user", "", "with --conversation, the user's id on the messages (default: the conversation's user)")
	registerRetention(fl, &f.retention)
	return cmd
}

// chatEngine is the agent of a chat, served on a worker of its own on the
// chat's in-process broker, so that /model can replace it.
type chatEngine struct {
	agent *agent.Agent[string]
	rt    *agent.Runtime
	stop  func()
}

func openChatEngine(ctx context.Context, f *agentFlags, retention time.Duration, getenv func(string) string, b calf.Broker, st store.Store) (*chatEngine, error) {
	a, err := newAssistant(ctx, f, getenv, true)
	if err != nil {
		return nil, err
	}
	w := agent.NewWorker(b, st, &agent.WorkerOptions{DrainTimeout: shutdownTimeout, Retention: retention, Runtime: runtimeOptions(ctx)})
	if err := a.Serve(ctx, w.Runtime(), nil); err != nil {
		return nil, failure(err)
	}
	return &chatEngine{agent: a, rt: w.Runtime(), stop: backgroundWorker(ctx, w)}, nil
}

// backgroundWorker runs w until the returned stop, which interrupts what is in
// progress (an abandoned run's handlers) and waits for w to end.
func backgroundWorker(ctx context.Context, w *agent.Worker) (stop func()) {
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	ran := make(chan error, 1)
	go func() { ran <- w.Run(wctx) }()
	return func() {
		w.Interrupt()
		cancel()
		<-ran
	}
}

func chat(cmd *cobra.Command, f *chatFlags, getenv func(string) string) error {
	ctx := cmd.Context()
	if f.conversation != "" {
		return chatConversation(cmd, f, getenv)
	}
	if f.broker != "" || f.user != "" {
		return usageError(errors.New("--broker and --user are for a chat in a conversation: give it with --conversation ID"))
	}
	if err := checkStore(f.store); err != nil {
		return err
	}
	if err := checkRetention(f.retention); err != nil {
		return err
	}
	if f.session != "" && !server.ValidSessionID(f.session) {
		return usageError(fmt.Errorf("--session %q: use letters, digits and ._:- (at most 128)", f.session))
	}
	st, err := openStore(ctx, f.store, nil)
	if err != nil {
		return err
	}
	defer st.Close()
	b, err := openBroker(ctx, defaultBroker, nil)
	if err != nil {
		return err
	}
	defer b.Close()
	eng, err := openChatEngine(ctx, &f.agentFlags, f.retention, getenv, b, st)
	if err != nil {
		return err
	}
	m := &chatModel{ctx: ctx, flags: f, getenv: getenv, broker: b, store: st, eng: eng, session: f.session}
	if name := getenv(envChatLog); name != "" {
		lf, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			return usageError(fmt.Errorf("%s: %w", envChatLog, err))
		}
		defer lf.Close()
		m.log = lf
	}
	defer func() { m.eng.stop() }()
	if m.session == "" {
		m.session = newSessionID()
	}
	m.input = textinput.New()
	m.input.Prompt = "› "
	m.input.Placeholder = "ask anything, or /help"
	m.input.CharLimit = 64 << 10
	m.input.Focus()
	p := tea.NewProgram(m, tea.WithContext(ctx), tea.WithInput(cmd.InOrStdin()), tea.WithOutput(cmd.OutOrStdout()))
	if _, err := p.Run(); err != nil && !errors.Is(err, tea.ErrProgramKilled) && ctx.Err() == nil {
		return failure(err)
	}
	return nil
}

// newSessionID returns a fresh session id, short enough to type.
func newSessionID() string { return "chat-" + calf.NewID()[:10] }

// chatModel is the chat's state for bubbletea.
type chatModel struct {
	ctx    context.Context
	flags  *chatFlags
	getenv func(string) string
	broker calf.Broker
	store  store.Store
	eng    *chatEngine
	log    io.Writer // what Update handles, when CALF_CHAT_LOG names a file

	input   textinput.Model
	session string
	width   int

	// The run in progress.
	running  bool
	cancel   context.CancelFunc
	events   chan tea.Msg
	out      *lineSink
	view     *humanView
	approval *approval.Approval
}

// runEvent is an event of the run in progress; runEnded says it ended.
type runEvent struct{ ev agent.Event }
type runEnded struct{ err error }

// lineSink collects what a humanView writes: whole lines are printed above
// the input, the line in progress is shown live.
type lineSink struct{ b strings.Builder }

func (s *lineSink) Write(p []byte) (int, error) { return s.b.Write(p) }

// lines returns and removes the whole lines written, without their last
// newline.
func (s *lineSink) lines() string {
	str := s.b.String()
	i := strings.LastIndexByte(str, '\n')
	if i < 0 {
		return ""
	}
	s.b.Reset()
	s.b.WriteString(str[i+1:])
	return str[:i]
}

// rest returns and removes everything written.
func (s *lineSink) rest() string {
	str := strings.TrimSuffix(s.b.String(), "\n")
	s.b.Reset()
	return str
}

func (s *lineSink) partial() string { return s.b.String() }

var (
	dim    = lipgloss.NewStyle().Faint(true)
	bold   = lipgloss.NewStyle().Bold(true)
	warn   = lipgloss.NewStyle().Foreground(lipgloss.Color("3")).Bold(true)
	failed = lipgloss.NewStyle().Foreground(lipgloss.Color("1"))
)

func (m *chatModel) Init() tea.Cmd {
	intro := fmt.Sprintf("calf chat · agent %s · model %s · session %s · /help for commands", m.eng.agent.Name(), m.eng.agent.Model().Name(), m.session)
	cmds := []tea.Cmd{textinput.Blink, tea.Println(dim.Render(intro))}
	if info, err := session.LoadInfo(m.ctx, m.eng.rt.Store(), m.session); err == nil {
		cmds = append(cmds, tea.Println(dim.Render(fmt.Sprintf("resumed: %d messages, %d runs", info.Messages, info.Runs))))
	}
	return tea.Sequence(cmds...)
}

func (m *chatModel) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	if m.log != nil {
		m.logMsg(msg)
	}
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width = msg.Width
		m.input.SetWidth(max(20, msg.Width-4))
		return m, nil
	case tea.KeyPressMsg:
		return m.key(msg)
	case runEvent:
		if m.view == nil {
			return m, nil // a run that was closed
		}
		return m, m.event(msg.ev)
	case runEnded:
		return m, m.ended(msg.err)
	case approvalAnswered:
		// The run's events are read on meanwhile: no second reader here.
		if msg.err != nil {
			return m, tea.Println(failed.Render("approval: " + msg.err.Error()))
		}
		return m, tea.Println(dim.Render(msg.text))
	}
	var cmd tea.Cmd
	m.input, cmd = m.input.Update(msg)
	return m, cmd
}

// logMsg writes msg to the chat's log, with whether an approval is asked.
func (m *chatModel) logMsg(msg tea.Msg) {
	var what string
	switch msg := msg.(type) {
	case tea.KeyPressMsg:
		what = fmt.Sprintf("key %q", msg.String())
	case runEvent:
		what = "event " + string(msg.ev.Kind)
		if a := msg.ev.Approval; a != nil {
			what += fmt.Sprintf(" %s %s", a.ID, a.Status)
		}
	case runEnded:
		what = fmt.Sprintf("run ended: %v", msg.err)
	case approvalAnswered:
		what = fmt.Sprintf("approval answered: %s %v", msg.text, msg.err)
	default:
		what = fmt.Sprintf("%T", msg)
	}
	fmt.Fprintf(m.log, "%s %s (asking: %v, running: %v, input %q)\n", time.Now().Format("15:04:05.000"), what, m.approval != nil, m.running, m.input.Value())
}

// approvalAnswered reports the answer given to an approval.
type approvalAnswered struct {
	text string
	err  error
}

func (m *chatModel) key(k tea.KeyPressMsg) (tea.Model, tea.Cmd) {
	switch k.String() {
	case "ctrl+d":
		if m.running {
			m.cancel()
		}
		return m, tea.Quit
	case "ctrl+c", "esc":
		if m.running {
			m.cancel()
			return m, nil
		}
		if k.String() == "ctrl+c" {
			return m, tea.Quit
		}
		return m, nil
	}
	if a := m.approval; a != nil {
		ans := approval.Answer{Digest: a.Digest}
		var text string
		switch strings.ToLower(k.String()) {
		case "y":
			ans.Approve, text = true, "allowed "+a.ToolName
		case "a":
			ans.Approve, ans.ForSession, text = true, true, "allowed "+a.ToolName+" for this session"
		case "n":
			ans.Message, text = "the user refused", "denied "+a.ToolName
		default:
			return m, nil
		}
		m.approval = nil
		rt, id := m.eng.rt, a.ID
		ctx := m.ctx
		return m, func() tea.Msg {
			_, err := rt.Respond(ctx, id, ans)
			return approvalAnswered{text: text, err: err}
		}
	}
	if k.String() == "enter" {
		if m.running {
			return m, nil // one answer at a time
		}
		line := strings.TrimSpace(m.input.Value())
		m.input.Reset()
		if line == "" {
			return m, nil
		}
		if strings.HasPrefix(line, "/") {
			return m.command(line)
		}
		return m, m.start(line)
	}
	var cmd tea.Cmd
	m.input, cmd = m.input.Update(k)
	return m, cmd
}

// start starts a run of prompt in the session, and reads its events.
func (m *chatModel) start(prompt string) tea.Cmd {
	ctx, cancel := context.WithCancel(m.ctx)
	m.running, m.cancel = true, cancel
	m.out = &lineSink{}
	rt := m.eng.rt
	m.view = newHumanView(m.out, m.out, false, func(runID string) ([]agent.ToolCallRecord, error) {
		st, err := rt.LoadAgentRun(ctx, runID)
		if err != nil {
			return nil, err
		}
		return st.ToolCalls, nil
	})
	ch := make(chan tea.Msg, 64)
	m.events = ch
	a, opts := m.eng.agent, &agent.RunOptions{SessionID: m.session}
	go func() {
		send := func(msg tea.Msg) bool {
			select {
			case ch <- msg:
				return true
			case <-ctx.Done():
				return false
			}
		}
		var end error
		for ev, err := range a.RunStream(ctx, rt, prompt, opts) {
			if err != nil {
				end = err
				break
			}
			if !send(runEvent{ev}) {
				end = ctx.Err() // stopping the iteration cancels the run
				break
			}
		}
		// The chat reads the events until this one, even after a stop.
		ch <- runEnded{err: end}
	}()
	return tea.Sequence(tea.Println(bold.Render("› ")+prompt), m.next())
}

// next waits for the run's next event.
func (m *chatModel) next() tea.Cmd {
	ch := m.events
	if ch == nil {
		return nil
	}
	return func() tea.Msg { return <-ch }
}

// event shows one event of the run.
func (m *chatModel) event(ev agent.Event) tea.Cmd {
	var cmds []tea.Cmd
	if ev.Kind == agent.EventApproval && ev.Approval.Status == approval.Pending {
		m.approval = ev.Approval
	}
	_ = m.view.show(ev)
	if ev.Kind == agent.EventOutput {
		_ = m.view.close()
	}
	if lines := m.out.lines(); lines != "" {
		cmds = append(cmds, tea.Println(lines))
	}
	if ev.Kind == agent.EventOutput && ev.Output.Status == agent.OutputComplete {
		if rest := m.out.rest(); rest != "" {
			cmds = append(cmds, tea.Println(rest))
		}
		cmds = append(cmds, tea.Println(dim.Render(usageLine(ev.Output.Usage, ev.Output.Cost))))
	}
	return tea.Sequence(append(cmds, m.next())...)
}

// ended closes the run.
func (m *chatModel) ended(err error) tea.Cmd {
	var cmds []tea.Cmd
	if m.view != nil {
		_ = m.view.close()
		if rest := m.out.rest(); rest != "" {
			cmds = append(cmds, tea.Println(rest))
		}
	}
	switch {
	case errors.Is(err, context.Canceled):
		cmds = append(cmds, tea.Println(warn.Render("stopped")))
	case err != nil:
		cmds = append(cmds, tea.Println(failed.Render("error: "+err.Error())))
	}
	m.running, m.approval, m.events, m.view = false, nil, nil, nil
	if m.cancel != nil {
		m.cancel()
	}
	return tea.Sequence(cmds...)
}

// usageLine describes a run's tokens and cost.
func usageLine(u model.Usage, c model.Cost) string {
	s := fmt.Sprintf("%d tokens in, %d out", u.InputTokens, u.OutputTokens)
	switch {
	case c.USD >= 0.0001:
		s += fmt.Sprintf(" · $%.4f", c.USD)
	case c.USD > 0:
		s += " · <$0.0001"
	}
	if len(c.Unpriced) > 0 {
		s += " · unpriced: " + strings.Join(c.Unpriced, ", ")
	}
	return s
}

func (m *chatModel) View() tea.View {
	var b strings.Builder
	if m.running && m.out != nil {
		if p := m.out.partial(); p != "" {
			b.WriteString(p + "\n")
		}
	}
	if a := m.approval; a != nil {
		b.WriteString(warn.Render(fmt.Sprintf("? %s %s needs approval (%s)", a.ToolName, oneLine(compactJSON(string(a.Arguments)), lineWidth), a.Reason)))
		b.WriteString("\n  [y] allow  [n] deny  [a] allow for this session\n")
	} else if m.running {
		b.WriteString(dim.Render("… working (Esc to stop)") + "\n")
	}
	b.WriteString(m.input.View())
	return tea.NewView(b.String())
}

// resumeShown is how many of a session's last messages /resume shows.
const resumeShown = 10

// resumeText returns what /resume prints for the session id: its last
// messages, the user's after "› ", the tool calls on a line each, then
// how long the session is.
func resumeText(ctx context.Context, st store.Store, id string) (string, error) {
	s, err := session.Load(ctx, st, id)
	if err != nil {
		return "", err
	}
	var shown []string
	msgs := s.Messages
	for i := len(msgs) - 1; i >= 0 && len(shown) < resumeShown; i-- {
		m := msgs[i]
		var lines []string
		switch m.Role {
		case model.RoleUser:
			if t := strings.TrimSpace(m.Text()); t != "" {
				lines = append(lines, bold.Render("› ")+clip(t, 2000))
			}
		case model.RoleAssistant:
			if t := strings.TrimSpace(m.Text()); t != "" {
				lines = append(lines, clip(t, 2000))
			}
			for _, c := range m.ToolCalls {
				lines = append(lines, dim.Render("→ "+c.Name+" "+oneLine(compactJSON(c.Arguments), lineWidth)))
			}
		}
		if len(lines) > 0 {
			shown = append(shown, strings.Join(lines, "\n"))
		}
	}
	slices.Reverse(shown)
	var b strings.Builder
	if n := len(msgs) - len(shown); len(shown) == resumeShown && n > 0 {
		b.WriteString(dim.Render(fmt.Sprintf("… %d earlier messages", n)) + "\n")
	}
	for _, s := range shown {
		b.WriteString(s + "\n")
	}
	fmt.Fprintf(&b, "resumed session %s: %d messages", id, len(msgs))
	if s.Title != "" {
		fmt.Fprintf(&b, ", %q", s.Title)
	}
	return b.String(), nil
}

// clip cuts s to at most n runes, marking the cut.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

// forkSession copies the session id into a new one, named after it
// (ID-fork, else ID-fork-2, ...) and titled as it with " (fork)".
func forkSession(ctx context.Context, st store.Store, id string) (*session.Session, error) {
	info, err := session.LoadInfo(ctx, st, id)
	if err != nil {
		return nil, err
	}
	base := id
	if i := strings.LastIndex(base, "-fork"); i > 0 {
		if rest := base[i+len("-fork"):]; rest == "" || rest[0] == '-' && strings.Trim(rest[1:], "0123456789") == "" {
			base = base[:i]
		}
	}
	title := cmp.Or(info.Title, base)
	if !strings.HasSuffix(title, " (fork)") {
		title += " (fork)"
	}
	for n := 1; ; n++ {
		name := base + "-fork"
		if n > 1 {
			name += fmt.Sprintf("-%d", n)
		}
		if len(name) > 128 {
			name = newSessionID()
		}
		s, err := session.Fork(ctx, st, id, &session.ForkOptions{ID: name, Title: title})
		if !errors.Is(err, session.ErrExists) || n >= 100 {
			return s, err
		}
	}
}

// command runs a slash command.
func (m *chatModel) command(line string) (tea.Model, tea.Cmd) {
	name, arg, _ := strings.Cut(strings.TrimPrefix(line, "/"), " ")
	arg = strings.TrimSpace(arg)
	say := func(s string) (tea.Model, tea.Cmd) {
		return m, tea.Sequence(tea.Println(bold.Render("› ")+line), tea.Println(s))
	}
	ctx, rt := m.ctx, m.eng.rt
	switch name {
	case "quit", "exit", "q":
		return m, tea.Quit
	case "help":
		return say(strings.Join([]string{
			"/new              start a new session",
			"/sessions         list the sessions, newest first",
			"/resume ID        continue the session ID, its last messages shown",
			"/fork             continue in a copy of this session (ID-fork)",
			"/cost             the session's tokens and cost",
			"/model [MODEL]    show the model, or switch to MODEL",
			"/quit             leave (also Ctrl+D)",
		}, "\n"))
	case "new":
		m.session = newSessionID()
		return say("new session " + m.session)
	case "sessions":
		page, err := session.List(ctx, rt.Store(), &session.ListOptions{Limit: 20})
		if err != nil {
			return say(failed.Render("sessions: " + err.Error()))
		}
		if len(page.Sessions) == 0 {
			return say("no sessions yet")
		}
		var lines []string
		for _, s := range page.Sessions {
			mark := "  "
			if s.ID == m.session {
				mark = "* "
			}
			lines = append(lines, fmt.Sprintf("%s%-18s %3d messages  %s  %s", mark, s.ID, s.Messages, s.UpdatedAt.Local().Format("2006-01-02 15:04"), oneLine(s.Title, 40)))
		}
		return say(strings.Join(lines, "\n"))
	case "resume":
		if arg == "" {
			return say("usage: /resume ID (/sessions lists them)")
		}
		text, err := resumeText(ctx, rt.Store(), arg)
		if err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return say(failed.Render("no session " + arg))
			}
			return say(failed.Render("resume: " + err.Error()))
		}
		m.session = arg
		return say(text)
	case "fork":
		if _, err := session.LoadInfo(ctx, rt.Store(), m.session); err != nil {
			return say("nothing to fork yet: this session has no messages")
		}
		s, err := forkSession(ctx, rt.Store(), m.session)
		if err != nil {
			return say(failed.Render("fork: " + err.Error()))
		}
		old := m.session
		m.session = s.ID
		return say(fmt.Sprintf("forked %s into %s (%q), now current", old, s.ID, s.Title))
	case "cost":
		info, err := session.LoadInfo(ctx, rt.Store(), m.session)
		if err != nil {
			return say("no cost yet: this session has no runs")
		}
		return say(fmt.Sprintf("session %s: %d runs, %s", m.session, info.Runs, usageLine(info.Usage, info.Cost)))
	case "model":
		if arg == "" {
			return say("model " + m.eng.agent.Model().Name())
		}
		f := m.flags.agentFlags
		f.model = arg
		eng, err := openChatEngine(ctx, &f, m.flags.retention, m.getenv, m.broker, m.store)
		if err != nil {
			return say(failed.Render("model: " + err.Error()))
		}
		m.eng.stop()
		m.eng, m.flags.model = eng, arg
		return say("model " + eng.agent.Model().Name())
	}
	return say(failed.Render("unknown command /" + name + ": /help lists them"))
}
