package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"charm.land/bubbles/v2/textinput"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/term"
	"github.com/spf13/cobra"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/conversation"
)

// chatConversation is calf chat --conversation ID: the terminal chat as the
// user's side of a conversation.
func chatConversation(cmd *cobra.Command, f *chatFlags, getenv func(string) string) error {
	ctx := cmd.Context()
	if f.session != "" {
		return usageError(errors.New("--session resumes a chat with the agent; a conversation keeps its own: give one or the other"))
	}
	if f.pick != "" {
		return usageError(errors.New("--agent picks the agent of a chat outside conversations; a conversation's agents are its prototypes"))
	}
	for _, b := range builtinFlags {
		if b.set(&f.agentFlags) {
			return usageError(fmt.Errorf("--%s configures the built-in assistant; a conversation's agents are made of its prototypes", b.name))
		}
	}
	lf := &linkFlags{agentFlags: f.agentFlags, conversation: f.conversation, store: f.store, broker: f.broker, user: f.user, changed: cmd.Flags().Changed,
		stderr: cmd.ErrOrStderr()}
	l, err := openLink(ctx, lf, getenv)
	if err != nil {
		return err
	}
	defer l.close()
	history, err := l.convs.History(ctx, l.conv.ID)
	if err != nil {
		return failure(err)
	}
	answers, err := l.answers(ctx)
	if err != nil {
		return err
	}
	// The events of the entry instance's runs (their ids derive from the
	// instance's), for their tool calls and their text as it comes.
	runs, err := l.client.Follow(ctx, agentChannels, l.conv.Entry)
	if err == nil {
		err = runs.AddTree(agentChannels)
	}
	if err != nil {
		return failure(err)
	}
	defer runs.Close()
	m := &convChatModel{ctx: ctx, link: l, history: history, answers: answers, runs: runs, sent: map[string]bool{}, width: 80}
	// The width before the first resize, for the history printed first.
	if out, ok := cmd.OutOrStdout().(*os.File); ok {
		if w, _, err := term.GetSize(out.Fd()); err == nil && w > 0 {
			m.width = w
		}
	}
	m.input = textinput.New()
	m.input.Prompt = "› "
	m.input.Placeholder = "your message, or /help"
	m.input.CharLimit = 64 << 10
	m.input.Focus()
	p := tea.NewProgram(m, tea.WithContext(ctx), tea.WithInput(cmd.InOrStdin()), tea.WithOutput(cmd.OutOrStdout()))
	if _, err := p.Run(); err != nil && !errors.Is(err, tea.ErrProgramKilled) && ctx.Err() == nil {
		return failure(err)
	}
	return nil
}

// convChatModel is the state of a chat in a conversation, for bubbletea.
type convChatModel struct {
	ctx     context.Context
	link    *convLink
	history []conversation.Exchange
	answers <-chan conversation.ConversationMessage
	// runs follows the events of the entry instance's runs; streamed is
	// the text of the step being written (shown live under the
	// messages), of the run streamedRun.
	runs        *calf.Follower
	streamed    strings.Builder
	streamedRun string
	ended       []string // the last runs that ended, whose deltas are late
	width       int
	input       textinput.Model
	// sent are the correlation ids of the messages sent and not answered.
	sent map[string]bool
}

// convAnswer is a message that came back on entry→user; convSent says how
// a send went.
type convAnswer struct {
	m conversation.ConversationMessage
}
type convSent struct {
	corr string
	err  error
}

func (m *convChatModel) Init() tea.Cmd {
	c := m.link.conv
	intro := fmt.Sprintf("calf chat · conversation %s · with %s · user %s · /help for commands", c.ID, c.Entry, m.link.user)
	cmds := []tea.Cmd{textinput.Blink, m.println(dim.Render(m.wrap(intro)))}
	// The history first: each exchange's message and answer.
	if len(m.history) > 0 {
		cmds = append(cmds, m.println(dim.Render(fmt.Sprintf("── the conversation so far: %d exchanges ──", len(m.history)))))
		for _, e := range m.history {
			cmds = append(cmds, m.println(m.wrap(bold.Render("› ")+e.Message)))
			if e.Answer != "" {
				cmds = append(cmds, m.println(m.wrap(e.Answer)))
			}
		}
		cmds = append(cmds, m.println(dim.Render("── now ──")))
	}
	if c.Status != conversation.StatusRunning {
		cmds = append(cmds, tea.Println(warn.Render(fmt.Sprintf("conversation %s is %s: it takes no message", c.ID, c.Status))))
	}
	return tea.Sequence(append(cmds, tea.Batch(m.nextAnswer(), m.nextRunEvent()))...)
}

// agentChannels are the channels of every agent's events.
const agentChannels = "calf.agent.>"

// convRunEvent is an event of a run of the entry instance.
type convRunEvent struct{ ev agent.Event }

// nextRunEvent waits for the next event of the entry instance's runs.
func (m *convChatModel) nextRunEvent() tea.Cmd {
	f, ctx := m.runs, m.ctx
	return func() tea.Msg {
		for {
			msg, err := f.Next(ctx)
			if err != nil {
				return nil
			}
			ev, err := agent.DecodeEvent(msg)
			if err != nil {
				continue
			}
			switch ev.Kind {
			case agent.EventDelta, agent.EventToolCall, agent.EventToolResult, agent.EventOutput:
				return convRunEvent{ev}
			}
		}
	}
}

// println prints the lines of s above the input, each on its own.
func (m *convChatModel) println(s string) tea.Cmd {
	lines := strings.Split(s, "\n")
	cmds := make([]tea.Cmd, len(lines))
	for i, l := range lines {
		cmds[i] = tea.Println(l)
	}
	return tea.Sequence(cmds...)
}

// wrap breaks s into lines of the terminal's width, between words.
func (m *convChatModel) wrap(s string) string {
	return lipgloss.Wrap(s, max(20, m.width), " ")
}

// runEvent shows a tool call or its result on a line of its own, the text
// written before it first; a delta adds to the text shown live.
func (m *convChatModel) runEvent(ev agent.Event) tea.Cmd {
	var cmds []tea.Cmd
	switch ev.Kind {
	case agent.EventOutput:
		// Its deltas may come after it, on their own channel: they are
		// shown no more, and the answer comes as a message.
		m.ended = append(m.ended[max(0, len(m.ended)-15):], ev.RunID)
		if ev.RunID == m.streamedRun {
			m.streamed.Reset()
		}
	case agent.EventDelta:
		if slices.Contains(m.ended, ev.RunID) {
			break
		}
		if ev.RunID != m.streamedRun {
			m.streamed.Reset()
			m.streamedRun = ev.RunID
		}
		m.streamed.WriteString(ev.Delta.Text)
	case agent.EventToolCall:
		if text := strings.TrimSpace(m.streamed.String()); text != "" && ev.RunID == m.streamedRun {
			cmds = append(cmds, m.println(m.wrap(text)))
		}
		m.streamed.Reset()
		cmds = append(cmds, tea.Println(dim.Render(strings.TrimSuffix(callLine(ev.ToolCall.ToolName, string(ev.ToolCall.Arguments)), "\n"))))
	case agent.EventToolResult:
		cmds = append(cmds, tea.Println(dim.Render(strings.TrimSuffix(resultLine(ev.ToolResult.Status, ev.ToolResult.Result), "\n"))))
	}
	// The next event is waited for last: a sequence runs one at a time.
	return tea.Sequence(append(cmds, m.nextRunEvent())...)
}

// nextAnswer waits for what comes back next.
func (m *convChatModel) nextAnswer() tea.Cmd {
	ch, ctx := m.answers, m.ctx
	return func() tea.Msg {
		select {
		case a := <-ch:
			return convAnswer{a}
		case <-ctx.Done():
			return nil
		}
	}
}

func (m *convChatModel) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width = msg.Width
		m.input.SetWidth(max(20, msg.Width-4))
		return m, nil
	case convRunEvent:
		return m, m.runEvent(msg.ev)
	case tea.KeyPressMsg:
		switch msg.String() {
		case "ctrl+c", "ctrl+d":
			return m, tea.Quit
		case "enter":
			line := strings.TrimSpace(m.input.Value())
			m.input.Reset()
			if line == "" {
				return m, nil
			}
			return m.enter(line)
		}
	case convSent:
		if msg.err != nil {
			delete(m.sent, msg.corr)
			return m, tea.Println(failed.Render("not sent: " + msg.err.Error()))
		}
		return m, nil
	case convAnswer:
		delete(m.sent, msg.m.CorrelationID)
		text := m.wrap(msg.m.Message)
		if isRefusal(msg.m) {
			text = failed.Render(text)
		}
		// The whole answer replaces the text shown as it came; deltas of
		// that run that come after it (their channel is another) are
		// shown no more.
		if m.streamedRun != "" && !slices.Contains(m.ended, m.streamedRun) {
			m.ended = append(m.ended[max(0, len(m.ended)-15):], m.streamedRun)
		}
		m.streamed.Reset()
		return m, tea.Sequence(m.println(text), m.nextAnswer())
	}
	var cmd tea.Cmd
	m.input, cmd = m.input.Update(msg)
	return m, cmd
}

// enter sends a line, or runs a command.
func (m *convChatModel) enter(line string) (tea.Model, tea.Cmd) {
	echo := m.println(m.wrap(bold.Render("› ") + line))
	switch line {
	case "/quit", "/exit", "/q":
		return m, tea.Quit
	case "/help":
		return m, tea.Sequence(echo, tea.Println(strings.Join([]string{
			"each line is a message to " + m.link.conv.Entry + "; its answer shows when it comes",
			"/history          the exchanges so far",
			"/quit             leave (also Ctrl+D)",
		}, "\n")))
	case "/history":
		h, err := m.link.convs.History(m.ctx, m.link.conv.ID)
		if err != nil {
			return m, tea.Sequence(echo, tea.Println(failed.Render("history: "+err.Error())))
		}
		var b strings.Builder
		for _, e := range h {
			fmt.Fprintf(&b, "%s%s\n%s\n", bold.Render("› "), m.wrap(e.Message), m.wrap(e.Answer))
		}
		fmt.Fprintf(&b, "%s", dim.Render(fmt.Sprintf("(%d exchanges)", len(h))))
		return m, tea.Sequence(echo, m.println(b.String()))
	}
	if strings.HasPrefix(line, "/") {
		return m, tea.Sequence(echo, tea.Println(failed.Render("unknown command "+line+": /help lists them")))
	}
	corr := calf.NewID()
	m.sent[corr] = true
	l, ctx := m.link, m.ctx
	return m, tea.Sequence(echo, func() tea.Msg {
		return convSent{corr: corr, err: l.send(ctx, line, corr)}
	})
}

func (m *convChatModel) View() tea.View {
	var b strings.Builder
	if text := m.streamed.String(); text != "" {
		b.WriteString(m.wrap(text) + "\n")
	} else if len(m.sent) > 0 {
		b.WriteString(dim.Render(fmt.Sprintf("… waiting for %s", m.link.conv.Entry)) + "\n")
	}
	b.WriteString(m.input.View())
	return tea.NewView(b.String())
}
