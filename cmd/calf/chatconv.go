package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"charm.land/bubbles/v2/textinput"
	tea "charm.land/bubbletea/v2"
	"github.com/spf13/cobra"

	"github.com/calf-go/calf"
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
	m := &convChatModel{ctx: ctx, link: l, history: history, answers: answers, sent: map[string]bool{}}
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
	input   textinput.Model
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
	cmds := []tea.Cmd{textinput.Blink, tea.Println(dim.Render(intro))}
	for _, e := range m.history {
		cmds = append(cmds, tea.Println(bold.Render("› ")+e.Message))
		if e.Answer != "" {
			cmds = append(cmds, tea.Println(e.Answer))
		}
	}
	if len(m.history) > 0 {
		cmds = append(cmds, tea.Println(dim.Render(fmt.Sprintf("(%d exchanges so far)", len(m.history)))))
	}
	if c.Status != conversation.StatusRunning {
		cmds = append(cmds, tea.Println(warn.Render(fmt.Sprintf("conversation %s is %s: it takes no message", c.ID, c.Status))))
	}
	return tea.Sequence(append(cmds, m.nextAnswer())...)
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
		m.input.SetWidth(max(20, msg.Width-4))
		return m, nil
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
		text := msg.m.Message
		if isRefusal(msg.m) {
			text = failed.Render(text)
		}
		return m, tea.Sequence(tea.Println(text), m.nextAnswer())
	}
	var cmd tea.Cmd
	m.input, cmd = m.input.Update(msg)
	return m, cmd
}

// enter sends a line, or runs a command.
func (m *convChatModel) enter(line string) (tea.Model, tea.Cmd) {
	echo := tea.Println(bold.Render("› ") + line)
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
			fmt.Fprintf(&b, "%s%s\n%s\n", bold.Render("› "), e.Message, e.Answer)
		}
		fmt.Fprintf(&b, "%s", dim.Render(fmt.Sprintf("(%d exchanges)", len(h))))
		return m, tea.Sequence(echo, tea.Println(b.String()))
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
	if len(m.sent) > 0 {
		b.WriteString(dim.Render(fmt.Sprintf("… waiting for %s", m.link.conv.Entry)) + "\n")
	}
	b.WriteString(m.input.View())
	return tea.NewView(b.String())
}
