package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/pflag"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/adapters"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/conversation"
	"github.com/calf-go/calf/conversation/host"
	"github.com/calf-go/calf/internal/convid"
	"github.com/calf-go/calf/store"
)

// linkFlags are the flags of the user's side of a conversation (calf chat
// --conversation, calf conversations send): the store and broker of the
// workers that serve it, the user, and, for a conversation served in this
// process, the agent-wide flags of the host's agents.
type linkFlags struct {
	agentFlags
	conversation string
	store        string
	broker       string
	user         string
	// changed reports whether a flag was given.
	changed func(name string) bool
	// stderr receives the warnings of a host in this process.
	stderr io.Writer
}

// hostFlagNames are the agent flags that apply to the agents of a host: the
// others make the built-in assistant, which a prototype says for itself.
var hostFlagNames = []string{"model", "max-turns", "timeout", "hook", "mcp"}

// registerHost registers, on fl, the agent flags of hostFlagNames, --agents
// and --root.
func (f *agentFlags) registerHost(fl *pflag.FlagSet) {
	all := pflag.NewFlagSet("agent", pflag.ContinueOnError)
	f.register(all)
	for _, name := range hostFlagNames {
		fl.AddFlag(all.Lookup(name))
	}
	f.registerAgents(fl, false)
}

// registerLink registers --broker and --user (--store is the caller's).
func (f *linkFlags) registerLink(fl *pflag.FlagSet) {
	fl.StringVar(&f.broker, "broker", "", brokerHelp+"; the workers' (calf worker --agents), or none to serve the conversation in this process")
	fl.StringVar(&f.user, "user", "", "the user's id on the messages (default: the conversation's user)")
}

// convLink is the user's side of one conversation: it sends the user's
// messages on the user→entry channel and reads what comes back on
// entry→user. On a broker inside this process it runs a host that serves
// the conversation too.
type convLink struct {
	st     store.Store
	broker calf.Broker
	client *calf.Client
	convs  *conversation.Conversations
	conv   conversation.Conversation
	user   string
	// in and back are the user→entry and entry→user channels.
	in, back string
	// hosted says a host in this process serves the conversation.
	hosted bool
}

// openLink opens the conversation f names: its store, its broker (by
// default memory://, in this process), and on a broker in this process a
// host that serves it (the store's prototypes, those of --agents
// registered first). A conversation that does not exist is a failure; one
// that is stopped opens (its history is readable), and send refuses.
func openLink(ctx context.Context, f *linkFlags, getenv func(string) string) (l *convLink, err error) {
	if err := convid.CheckConversationID(f.conversation); err != nil {
		return nil, usageError(fmt.Errorf("conversation %q: %w", f.conversation, err))
	}
	if len(f.user) > convid.MaxUserIDLen {
		return nil, usageError(fmt.Errorf("--user is at most %d bytes", convid.MaxUserIDLen))
	}
	if err := checkStore(f.store); err != nil {
		return nil, err
	}
	brokerURL := f.broker
	if brokerURL == "" {
		brokerURL = defaultBroker
	}
	if err := checkBroker(brokerURL); err != nil {
		return nil, err
	}
	hosted := adapters.InProcess(brokerURL)
	if !hosted {
		for _, name := range append([]string{"agents", "root"}, hostFlagNames...) {
			if f.changed != nil && f.changed(name) {
				return nil, usageError(fmt.Errorf("--%s configures the agents of a conversation served in this process; on --broker %s the workers serve it",
					name, adapters.Redact(brokerURL)))
			}
		}
	}
	var protos []conversation.Prototype
	if hosted {
		if err := f.check(); err != nil {
			return nil, err
		}
		if f.agentsFile != "" {
			if protos, err = f.loadAgents(); err != nil {
				return nil, err
			}
		}
	}
	l = &convLink{hosted: hosted}
	opened := l
	defer func() {
		if err != nil {
			opened.close()
		}
	}()
	if l.st, err = openStore(ctx, f.store, nil); err != nil {
		return nil, err
	}
	l.convs = conversation.NewConversations(l.st, nil)
	if l.conv, err = l.convs.Get(ctx, f.conversation); err != nil {
		return nil, failure(err)
	}
	l.user = f.user
	switch {
	case l.user == "":
		l.user = l.conv.UserID
	case l.conv.UserID != "" && l.user != l.conv.UserID:
		return nil, usageError(fmt.Errorf("--user %q: conversation %s is user %q's", l.user, l.conv.ID, l.conv.UserID))
	}
	if l.user == "" {
		l.user = conversation.UserParticipant
	}
	l.in, _ = conversation.Channel(l.conv.ID, conversation.UserParticipant, l.conv.Entry)
	l.back, _ = conversation.Channel(l.conv.ID, l.conv.Entry, conversation.UserParticipant)
	// No log: it would write over a terminal chat's screen.
	if l.broker, err = openBroker(ctx, brokerURL, nil); err != nil {
		return nil, err
	}
	l.client = calf.NewClient(l.broker, nil)
	if hosted {
		if err := l.serve(ctx, &f.agentFlags, protos, getenv, f.stderr); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// serve runs a host of the conversations on the link's client, its agents
// made as calf worker --agents makes them, the prototypes protos
// registered first, and carries on the messages a previous process left
// unanswered.
func (l *convLink) serve(ctx context.Context, f *agentFlags, protos []conversation.Prototype, getenv func(string) string, warn io.Writer) error {
	host, err := f.newHost(ctx, agent.NewRuntime(l.client, l.st, runtimeOptions(ctx)), protos, getenv, host.Options{})
	if err != nil {
		return err
	}
	return serveHost(ctx, host, true, warn)
}

// close shuts the client down, letting its handlers finish, then closes
// the broker and the store.
func (l *convLink) close() {
	if l.client != nil {
		ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		_ = l.client.Shutdown(ctx)
		cancel()
	}
	if l.broker != nil {
		_ = l.broker.Close()
	}
	if l.st != nil {
		_ = l.st.Close()
	}
}

// send publishes the user's text on the user→entry channel with the
// correlation id corr, which its answer carries back, after
// Conversations.Route checked that the conversation runs.
func (l *convLink) send(ctx context.Context, text, corr string) error {
	ch, err := l.convs.Route(ctx, l.conv.ID, conversation.UserParticipant, l.conv.Entry)
	if err != nil {
		return failure(err)
	}
	m := conversation.ConversationMessage{ConversationID: l.conv.ID, UserID: l.user, Message: text,
		Timestamp: l.client.Now().UTC(), CorrelationID: corr}
	_, err = l.client.Emit(ctx, ch, m, calf.WithKey(l.conv.ID), calf.WithMetadata(calf.Metadata{CorrelationID: corr}))
	return failure(err)
}

// ask sends text and waits, up to wait, for its answer.
func (l *convLink) ask(ctx context.Context, text string, wait time.Duration) (conversation.ConversationMessage, error) {
	corr := calf.NewID()
	fl, err := l.client.Follow(ctx, l.back, corr)
	if err != nil {
		return conversation.ConversationMessage{}, failure(err)
	}
	defer fl.Close()
	if err := l.send(ctx, text, corr); err != nil {
		return conversation.ConversationMessage{}, err
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	for {
		msg, err := fl.Next(wctx)
		if err != nil {
			if ctx.Err() == nil && wctx.Err() != nil {
				return conversation.ConversationMessage{}, failure(fmt.Errorf("no answer from %s within %s (it may still come: calf chat --conversation %s shows it)",
					l.conv.Entry, wait, l.conv.ID))
			}
			return conversation.ConversationMessage{}, failure(err)
		}
		m, err := conversation.DecodeMessage(msg.Data)
		if err != nil || m.CorrelationID != corr {
			continue
		}
		return m, nil
	}
}

// answers subscribes to what comes back on entry→user from now on, in a
// private group, and delivers it on the returned channel until ctx ends.
func (l *convLink) answers(ctx context.Context) (<-chan conversation.ConversationMessage, error) {
	ch := make(chan conversation.ConversationMessage, 16)
	err := l.client.Handle(ctx, l.back, func(hctx context.Context, msg *calf.Message) error {
		m, err := conversation.DecodeMessage(msg.Data)
		if err != nil {
			return calf.Permanent(err)
		}
		select {
		case ch <- m:
			return nil
		case <-hctx.Done():
			return hctx.Err()
		case <-ctx.Done():
			return nil
		}
	}, nil)
	if err != nil {
		return nil, failure(err)
	}
	return ch, nil
}

// isRefusal reports whether an answer is an error message of the host.
func isRefusal(m conversation.ConversationMessage) bool {
	return m.IsError()
}
