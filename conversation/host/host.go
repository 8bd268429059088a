package host

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/conversation"
	"github.com/calf-go/calf/internal/convid"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/tool"
	"github.com/calf-go/calf/tool/builtin"
)

// Channels of the host, besides the conversation channels.
const (
	// ChannelPattern matches every conversation channel,
	// calf.conv.{conversation}.{from}.{to}; the host's handler subscribes
	// to it in the consumer group ChannelPattern.
	ChannelPattern = "calf.conv.*.*.*"
	// outputChannel receives the output of the runs the host starts
	// for the messages of LLM instances (their [agent.ReplyTo]), keyed by
	// conversation.
	outputChannel = "calf.convhost.output"
	// replyChannel carries the replies to the requests of the send tool
	// and of "# Run" blocks: the host's handler republishes there each
	// message an instance receives from an instance it started, with the
	// message's correlation id as the envelope's, for the waiting request
	// to read (every process that sends reads this channel).
	replyChannel = "calf.convhost.reply"
	// runBlockChannel carries the "# Run" blocks of a run's answer to
	// the handler that carries them out, keyed by run.
	runBlockChannel = "calf.convhost.runblock"
)

// Defaults of [Options].
const (
	// DefaultSendTimeout bounds the wait for an answer to a send.
	DefaultSendTimeout = 2 * time.Minute
	// DefaultMaxQueue bounds the messages waiting for an LLM instance.
	DefaultMaxQueue = 64
	// DefaultMaxRunRounds bounds the "# Run" blocks carried out for one
	// message.
	DefaultMaxRunRounds = 4
)

// CodeRequest is a message for an instance of a code prototype.
type CodeRequest struct {
	// Instance is the instance the message is for.
	Instance conversation.Instance
	// From is the sender: [.UserParticipant] or an instance id.
	From string
	// ID is the message's id on the broker: the same when it is delivered
	// again.
	ID string
	// Message is the message. Its CorrelationID, when set, identifies the
	// request: a message delivered again has the same one, so a handler
	// that changes state uses it as its idempotency key.
	Message conversation.ConversationMessage
}

// CodeHandler serves the instances of a code prototype: it answers a
// message with the text of the reply (package conversation/docmem has
// one). The host sends the reply back to the sender, with the request's
// correlation id. An error the sender should read belongs in the reply's
// text; an error returned is the infrastructure's (a store that cannot be
// reached), after which the message is delivered again, or parked at once
// when wrapped with [calf.Permanent].
type CodeHandler func(ctx context.Context, req CodeRequest) (string, error)

// Options configure a [Host]. Nil means the defaults.
type Options struct {
	// Model opens the model of an LLM prototype by its Model field (empty
	// when the prototype names none), as [AgentOptions.Model] does. This
	// package links no model provider: without Model, the instances of LLM
	// prototypes cannot be served and their messages are refused. Package
	// model/models opens every provider's models by name:
	//
	//	Model: func(name string) (model.Model, error) { return models.Open(name, nil) }
	Model func(name string) (model.Model, error)
	// Tools makes the built-in tool of that name for an LLM prototype.
	// Default: web_fetch; the file tools and bash only when Root is set,
	// confined to it; web_search never (it needs a provider).
	Tools func(name string) (tool.Tool, error)
	// Root is the directory the default file tools and bash work in.
	Root string
	// MCP makes the toolset of one of an LLM prototype's MCP servers, as
	// [AgentOptions.MCP] does: each agent the host makes gets a toolset of
	// its own per server, released when the runtime's client shuts down.
	// The command line passes an opener on package mcp's client; this
	// package connects no server itself. Default: none, and the messages
	// for the instances of a prototype that lists MCP servers are refused.
	MCP func(s conversation.MCPServer) (tool.Toolset, error)
	// Agent holds the options every agent the host makes of an LLM
	// prototype starts from, as [AgentOptions.Agent] (MaxTurns, Timeout,
	// Hooks, Toolsets that every agent shares...). The host sets its
	// SessionAnswersOnly (see KeepToolTraffic) and raises its ToolTimeout
	// to a quarter more than SendTimeout when it is lower, so that a
	// send's wait ends first.
	Agent *agent.Options
	// Code serves code prototypes by name, such as
	// {"docmem-agent": docmem.New(st, nil).CodeHandler()}.
	Code map[string]CodeHandler
	// SendTimeout bounds the wait for an answer to a send (the send tool,
	// a "# Run" block's send). Default DefaultSendTimeout.
	SendTimeout time.Duration
	// MaxQueue bounds the messages waiting for one LLM instance; past it a
	// message is refused. Default DefaultMaxQueue.
	MaxQueue int
	// MaxRunRounds bounds the "# Run" blocks carried out for one message:
	// past it, the answer goes to the sender as it is. Default
	// DefaultMaxRunRounds.
	MaxRunRounds int
	// AgentPrefix starts the names of the agents that serve LLM
	// prototypes: AgentPrefix + the prototype's name. Default "conv-".
	AgentPrefix string
	// DeleteChannels has Stop delete the conversation's channels on a
	// broker that can ([calf.ChannelDeleter]).
	DeleteChannels bool
	// Stream has the runs of LLM instances stream their text as it comes
	// ([agent.StreamEvent] on their agents' stream channels), for a user's
	// side that shows it live (calf chat --conversation). It costs a
	// broker message per chunk of text. Default: no deltas.
	Stream bool
	// Concurrency and MaxAttempts are passed to the subscriptions (and to
	// the agents' [agent.ServeOptions]). Zero means the broker's defaults.
	Concurrency, MaxAttempts int
	// KeepToolTraffic has the instances' sessions keep the tool calls of
	// their runs and the results, as an agent without [agent.Options.SessionAnswersOnly] does. By
	// default an LLM instance's session, its user-facing context, keeps
	// only the messages it answered and its answers
	// ([agent.Options.SessionAnswersOnly]); the tool traffic stays in its runs'
	// records, which [Host.ToolContext] reads.
	KeepToolTraffic bool
}

// Host serves the instances of conversations on an agent runtime: it
// handles every conversation channel in one consumer group, keyed by
// conversation, so any number of processes share the work and the
// messages of a conversation are handled in order. A message goes to the
// instance it is addressed to:
//
//   - an LLM instance queues it and answers it with a run of the agent
//     that serves its prototype, in a session whose id is the instance's
//     id, one run at a time per instance; the run's output comes back to
//     the host through [agent.ReplyTo] and goes to the sender. No
//     goroutine waits for a run.
//   - a code instance answers it with its [CodeHandler].
//   - an external instance is served by a process of its own, in any
//     language: the host forwards its messages to its prototype's
//     channel ([ExternalChannel]), where that process consumes them, and
//     relays the answers it sends back on the conversation channel.
//
// An instance whose run ends in an error ([agent.OutputFailed]), or that
// the host cannot serve, is marked failed ([.Conversations.Fail]) with the
// reason; its queued messages are refused, and so are later ones until
// [Host.Restart]. A message for an instance of a stopped conversation, a
// stopped or failed instance, or one that does not exist is answered by an
// error message ([.ConversationMessage.IsError]) from the addressee to
// the sender; a message that is none (it does not decode, or its two
// participants have no topic) is parked on the dead-letter channel.
// docs/conversations.md describes it all.
type Host struct {
	rt    *agent.Runtime
	convs *conversation.Conversations
	o     Options

	mu       sync.Mutex
	agents   map[string]*agent.Agent[string] // by prototype
	prepared map[string]bool                 // external prototypes whose group is prepared
	served   bool
	ctx      context.Context
}

// New returns a host of the conversations convs on the runtime rt.
// Its records (the instances' queues) go to the conversations' store.
func New(rt *agent.Runtime, convs *conversation.Conversations, opts *Options) *Host {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Tools == nil {
		root := o.Root
		o.Tools = func(name string) (tool.Tool, error) { return builtinTool(name, root) }
	}
	if o.SendTimeout <= 0 {
		o.SendTimeout = DefaultSendTimeout
	}
	if o.MaxQueue <= 0 {
		o.MaxQueue = DefaultMaxQueue
	}
	if o.MaxRunRounds <= 0 {
		o.MaxRunRounds = DefaultMaxRunRounds
	}
	if o.AgentPrefix == "" {
		o.AgentPrefix = "conv-"
	}
	return &Host{rt: rt, convs: convs, o: o, agents: map[string]*agent.Agent[string]{}, prepared: map[string]bool{}}
}

// builtinTool makes a built-in tool by name: web_fetch, or with a root the
// file tools and bash.
func builtinTool(name, root string) (tool.Tool, error) {
	switch name {
	case "web_fetch":
		return builtin.WebFetch(nil)
	case "read_file", "list_dir", "glob", "grep", "write_file", "edit_file", "bash":
		if root == "" {
			return nil, fmt.Errorf("the built-in tool %s needs host.Options.Root", name)
		}
	default:
		return nil, fmt.Errorf("the built-in tool %s is not available here", name)
	}
	var ts []tool.Tool
	var err error
	switch name {
	case "write_file", "edit_file":
		ts, err = builtin.EditTools(root, nil)
	case "bash":
		b, err := builtin.Bash(root, nil)
		if err != nil {
			return nil, err
		}
		return b, nil
	default:
		ts, err = builtin.ReadOnlyTools(root, nil)
	}
	if err != nil {
		return nil, err
	}
	for _, t := range ts {
		if t.Definition().Name == name {
			return t, nil
		}
	}
	return nil, fmt.Errorf("no built-in tool %s", name)
}

// Conversations returns the conversations the host serves.
func (h *Host) Conversations() *conversation.Conversations { return h.convs }

// Serve subscribes the host's handlers on its runtime, serves the agents
// of the LLM prototypes registered so far and prepares the groups of the
// channels of the external ones (those registered later when a message
// first needs them). The subscriptions last until the runtime's client
// shuts down. Serve returns once subscribed.
func (h *Host) Serve(ctx context.Context) error {
	h.mu.Lock()
	if h.served {
		h.mu.Unlock()
		return errors.New("conversation: the host is served already")
	}
	h.served, h.ctx = true, context.WithoutCancel(ctx)
	h.mu.Unlock()
	protos, err := h.convs.Prototypes().List(ctx)
	if err != nil {
		return fmt.Errorf("conversation: serve: %w", err)
	}
	for _, p := range protos {
		if kindOf(&p) == conversation.KindExternal {
			if err := h.prepareExternal(ctx, p.Name); err != nil {
				return fmt.Errorf("conversation: serve: %w", err)
			}
			continue
		}
		if kindOf(&p) != conversation.KindLLM {
			continue
		}
		if _, err := h.agentFor(ctx, p); err != nil {
			// Refused to the senders when a message needs it.
			h.rt.Client().Logger().Warn("conversation: prototype not served", "prototype", p.Name, "error", err)
		}
	}
	c := h.rt.Client()
	for _, s := range []struct {
		pattern string
		h       calf.Handler
	}{
		{outputChannel, h.onOutput},
		{runBlockChannel, h.onRunBlock},
		{ChannelPattern, h.onMessage},
	} {
		if err := c.Handle(ctx, s.pattern, s.h, &calf.SubscribeOptions{
			Group: s.pattern, Concurrency: h.o.Concurrency, MaxAttempts: h.o.MaxAttempts,
		}); err != nil {
			return fmt.Errorf("conversation: serve: %w", err)
		}
	}
	return nil
}

// kindOf returns the kind of p, an LLM prototype's when it names none.
func kindOf(p *conversation.Prototype) conversation.Kind {
	if p.Kind == "" {
		return conversation.KindLLM
	}
	return p.Kind
}

// Stop stops the conversation (Conversations.Stop), cancels the run in
// progress of each of its LLM instances (whose sender gets an error
// message, as do the senders of the messages still queued) and, with
// Options.DeleteChannels on a broker that can, deletes the channels
// of its topics. Messages sent to it from then on are refused.
func (h *Host) Stop(ctx context.Context, id string) (conversation.Conversation, error) {
	conv, err := h.convs.Stop(ctx, id)
	if err != nil {
		return conv, err
	}
	if err := h.cancelRuns(ctx, id); err != nil {
		return conv, err
	}
	if !h.o.DeleteChannels {
		return conv, nil
	}
	chs, err := h.Channels(ctx, id)
	if err != nil {
		return conv, err
	}
	if err := calf.DeleteChannels(ctx, h.rt.Client().Broker(), chs...); err != nil {
		return conv, fmt.Errorf("conversation %s: delete channels: %w", id, err)
	}
	return conv, nil
}

// Restart puts a failed instance of the conversation back to work, as
// [.Conversations.Restart] does: an instance fails when a run of it ends
// in an error or when the host cannot serve it (its prototype is not
// registered, its agent cannot be made, no code serves it), and from then
// on the messages sent to it are refused with the reason, until it is
// restarted. Messages are never a restart: a failed instance stays failed,
// visible in the records (calf conversations show), until someone who has
// fixed the cause restarts it.
func (h *Host) Restart(ctx context.Context, conv, instance string) (conversation.Instance, error) {
	return h.convs.Restart(ctx, conv, instance)
}

// cancelRuns cancels the current run of each LLM instance of the
// conversation.
func (h *Host) cancelRuns(ctx context.Context, id string) error {
	recs, err := h.convs.Store().List(ctx, kindInbox, id+"/", "", 0)
	if err != nil {
		return err
	}
	for _, rec := range recs {
		var b inbox
		if err := json.Unmarshal(rec.Data, &b); err != nil {
			return fmt.Errorf("conversation: inbox %s: %w", rec.ID, err)
		}
		if b.Current == nil {
			continue
		}
		proto, _, ok := convid.SplitInstanceID(strings.TrimPrefix(rec.ID, id+"/"))
		if !ok {
			continue
		}
		ref := runRef{Base: b.Current.Run, Round: b.Round}
		_, err := h.rt.Cancel(ctx, agent.RunRef{Name: h.o.AgentPrefix + proto, RunID: ref.runID()}, "conversation "+id+" stopped")
		if err != nil && !errors.Is(err, agent.ErrRunEnded) && !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("conversation %s: cancel run %s: %w", id, ref.runID(), err)
		}
	}
	return nil
}

// Channels returns the channels of the conversation's topics, both
// directions of each.
func (h *Host) Channels(ctx context.Context, id string) ([]string, error) {
	topics, err := h.convs.Topics(ctx, id)
	if err != nil {
		return nil, err
	}
	chs := make([]string, 0, 2*len(topics))
	for _, t := range topics {
		a, b := t.Channels()
		chs = append(chs, a, b)
	}
	return chs, nil
}

// derive returns a deterministic id of parts: 32 hex digits of their
// SHA-256, each part followed by a zero byte.
func derive(parts ...string) string {
	s := sha256.New()
	for _, p := range parts {
		s.Write([]byte(p))
		s.Write([]byte{0})
	}
	return hex.EncodeToString(s.Sum(nil)[:16])
}

// splitChannel returns the conversation and participants of a
// conversation channel.
func splitChannel(ch string) (conv, from, to string, ok bool) {
	parts := strings.Split(ch, ".")
	if len(parts) != 5 || parts[0] != "calf" || parts[1] != "conv" {
		return "", "", "", false
	}
	return parts[2], parts[3], parts[4], true
}
