package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/conversation"
	"github.com/calf-go/calf/conversation/internal/runblock"
	"github.com/calf-go/calf/internal/convid"
	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/tool"
)

// kindInbox is the record kind of an LLM instance's queue, [inbox].
const kindInbox = convid.KindInbox

// maxDone bounds the ids of handled messages an inbox remembers, to
// recognise a message delivered again.
const maxDone = 256

// inbox is an LLM instance's queue: the message its current run answers
// and those that wait, one run at a time so that each run sees the
// answers before it in the instance's session.
type inbox struct {
	// Seq counts the messages started.
	Seq     int         `json:"seq"`
	Current *inboxEntry `json:"current,omitempty"`
	// Round is the "# Run" round of the current message: its run's
	// id is Current.Run, then Current.Run + ".r{round}".
	Round int          `json:"round,omitempty"`
	Queue []inboxEntry `json:"queue,omitempty"`
	// Done are the ids of the latest messages answered, oldest first.
	Done []string `json:"done,omitempty"`
	// Failed is why the instance failed, when a run of it did: the
	// instance takes no message until restarted ([.Conversations.Restart]
	// clears it with the instance's status). It is kept here as well as in
	// the instance's record so that the queue and the failure change in
	// one write.
	Failed string `json:"failed,omitempty"`
}

type inboxEntry struct {
	// Msg is the message's id on the broker.
	Msg         string `json:"msg"`
	From        string `json:"from"`
	Correlation string `json:"correlation,omitempty"`
	Content     string `json:"content"`
	// Run is the id of the message's first run, set when it starts.
	Run string `json:"run,omitempty"`
}

func (b *inbox) has(msg string) bool {
	if b.Current != nil && b.Current.Msg == msg || slices.Contains(b.Done, msg) {
		return true
	}
	return slices.ContainsFunc(b.Queue, func(e inboxEntry) bool { return e.Msg == msg })
}

// start makes the next queued message current, when there is one.
func (b *inbox) start(instance string) {
	b.Current, b.Round = nil, 0
	if len(b.Queue) == 0 {
		return
	}
	e := b.Queue[0]
	b.Queue = b.Queue[1:]
	b.Seq++
	e.Run = instance + "." + strconv.Itoa(b.Seq)
	b.Current = &e
}

func (b *inbox) done(msg string) {
	b.Done = append(b.Done, msg)
	if len(b.Done) > maxDone {
		b.Done = b.Done[len(b.Done)-maxDone:]
	}
}

// runRef is the [agent.ReplyTo.Ref] of a run the host starts: where its
// answer goes.
type runRef struct {
	Conversation string `json:"c"`
	Instance     string `json:"i"`
	Prototype    string `json:"p"`
	From         string `json:"f"`
	Correlation  string `json:"corr,omitempty"`
	Msg          string `json:"m"`
	// Base is the message's first run; Round the "# Run" round.
	Base  string `json:"b"`
	Round int    `json:"r,omitempty"`
	// Blocks says the prototype has subagents: its answers' "# Run"
	// blocks are carried out.
	Blocks bool `json:"x,omitempty"`
}

func (r *runRef) runID() string {
	if r.Round == 0 {
		return r.Base
	}
	return r.Base + ".r" + strconv.Itoa(r.Round)
}

// content is what a message asks of an LLM instance: its text, and its
// command as a JSON array.
func content(m *conversation.ConversationMessage) string {
	s := m.Message
	if len(m.Command) > 0 {
		cmd, _ := json.Marshal(m.Command)
		s = strings.TrimSpace(s + "\n\ncommand: " + string(cmd))
	}
	return s
}

// enqueue queues a message for an LLM instance and starts its run when
// the instance has none in progress.
func (h *Host) enqueue(ctx context.Context, p conversation.Prototype, inst conversation.Instance, from string, msg *calf.Message, m *conversation.ConversationMessage, refuse func(string, ...any) error) error {
	if _, err := h.agentFor(ctx, p); err != nil {
		if calf.IsUnavailable(err) {
			return err
		}
		return h.failAndRefuse(ctx, inst, fmt.Sprintf("%s cannot be served: %v", inst.ID, err), refuse)
	}
	var start *inboxEntry
	busy := false
	round := 0
	failed := ""
	_, err := store.Update(ctx, h.convs.Store(), kindInbox, inst.Conversation+"/"+inst.ID, func(data []byte, exists bool) ([]byte, error) {
		start, busy, round, failed = nil, false, 0, ""
		var b inbox
		if exists {
			if err := json.Unmarshal(data, &b); err != nil {
				return nil, calf.Permanent(fmt.Errorf("conversation: inbox of %s: %w", inst.ID, err))
			}
		}
		if b.Failed != "" && !b.has(msg.ID) {
			failed = b.Failed
			return nil, nil
		}
		if b.has(msg.ID) {
			if b.Current != nil && b.Current.Msg == msg.ID {
				start, round = b.Current, b.Round // delivered again: start again, which starts nothing new
			}
			return nil, nil
		}
		if len(b.Queue) >= h.o.MaxQueue {
			busy = true
			return nil, nil
		}
		b.Queue = append(b.Queue, inboxEntry{Msg: msg.ID, From: from, Correlation: m.CorrelationID, Content: content(m)})
		if b.Current != nil {
			return json.Marshal(b)
		}
		b.start(inst.ID)
		start = b.Current
		return json.Marshal(b)
	})
	if err != nil {
		return err
	}
	if failed != "" {
		return refuse("%s is %s: %s", inst.ID, conversation.StatusError, failed)
	}
	if busy {
		return refuse("%s has %d messages waiting already", inst.ID, h.o.MaxQueue)
	}
	if start == nil || round > 0 {
		return nil // queued, or a "# Run" round under way: its handler starts it
	}
	return h.submit(ctx, p.Name, &runRef{Conversation: inst.Conversation, Instance: inst.ID, Prototype: p.Name,
		From: start.From, Correlation: start.Correlation, Msg: start.Msg, Base: start.Run, Blocks: len(p.Subagents) > 0}, start.Content)
}

// submit starts the run ref names, of the agent of its prototype, in the
// instance's session, with its output sent to outputChannel.
func (h *Host) submit(ctx context.Context, proto string, ref *runRef, text string) error {
	data, err := json.Marshal(ref)
	if err != nil {
		return err
	}
	id := ref.runID()
	return h.rt.Submit(ctx, &agent.SubmitRequest{
		Run:       agent.RunRef{Name: h.o.AgentPrefix + proto, RunID: id},
		SessionID: ref.Instance,
		Input: &agent.InputEvent{Content: text, Stream: h.o.Stream, ReplyTo: &agent.ReplyTo{
			Channel: outputChannel, Key: ref.Conversation, CorrelationID: id, Ref: string(data),
		}},
	})
}

// runBlock is the payload of runBlockChannel: the "# Run" commands of
// a run's answer, to carry out before the next round.
type runBlock struct {
	Ref      runRef             `json:"ref"`
	Commands []runblock.Command `json:"commands,omitempty"`
	// Problems, when the block could not be parsed, go back to the model
	// in place of results.
	Problems string `json:"problems,omitempty"`
}

// onOutput handles the output of a run the host started: it sends the
// answer to the sender and starts the instance's next message, or, for an
// answer with "# Run" blocks, has them carried out first.
func (h *Host) onOutput(ctx context.Context, msg *calf.Message) error {
	var ev agent.OutputEvent
	if err := msg.Decode(&ev); err != nil {
		return calf.Permanent(err)
	}
	var ref runRef
	if err := json.Unmarshal([]byte(ev.Ref), &ref); err != nil || ref.Base == "" {
		return calf.Permanent(fmt.Errorf("conversation: output %s: bad ref %q", msg.ID, ev.Ref))
	}
	var text string
	var block *runBlock
	if ev.Status == agent.OutputComplete {
		if err := json.Unmarshal(ev.Content, &text); err != nil {
			text = string(ev.Content)
		}
		switch {
		case !ref.Blocks:
			// A prototype without subagents has no blocks to carry out.
		case ref.Round < h.o.MaxRunRounds:
			cmds, rest, err := runblock.Parse(text)
			var rerr *runblock.Error
			switch {
			case errors.As(err, &rerr):
				block = &runBlock{Ref: ref, Problems: rerr.Error()}
			case len(cmds) > 0:
				block = &runBlock{Ref: ref, Commands: cmds}
			}
			text = rest
		default:
			if _, rest, err := runblock.Parse(text); err == nil {
				text = rest
			}
		}
		if text == "" && block == nil {
			text = convid.ErrorPrefix + "the agent gave no answer"
		}
	} else {
		text = convid.ErrorPrefix + "the run of " + ref.Instance + " ended " + ev.Status
		if ev.Error != "" {
			text += ": " + ev.Error
		}
	}
	stopped := false
	if c, err := h.convs.Get(ctx, ref.Conversation); err != nil {
		return err
	} else if c.Status != conversation.StatusRunning {
		stopped = true
	}
	// A run that failed fails its instance (a cancelled one does not: it
	// was stopped on purpose), which takes no message until restarted.
	failed := ""
	if ev.Status == agent.OutputFailed && !stopped {
		failed = "the run " + ref.runID() + " failed"
		if ev.Error != "" {
			failed += ": " + ev.Error
		}
		if len(failed) > convid.MaxErrorLen {
			failed = failed[:convid.MaxErrorLen] + "…"
		}
	}
	answer := block == nil || stopped
	if answer {
		if stopped && block != nil {
			text = convid.ErrorPrefix + "conversation " + ref.Conversation + " is stopped"
		}
		// The answer goes before the queue moves on: a process that ends
		// in between leaves the message current, and whoever carries it
		// on (a redelivery, Host.Recover) sends the same answer, by its
		// id, rather than none.
		if err := h.reply(ctx, ref.Conversation, ref.Instance, ref.From, text, ref.Correlation, derive("answer", ref.Base)); err != nil {
			return err
		}
	}
	if failed != "" {
		// Recorded before the queue moves on, as the answer is.
		if err := h.convs.Fail(ctx, ref.Conversation, ref.Instance, failed); err != nil {
			return err
		}
	}
	var next *inboxEntry
	var refused []inboxEntry
	_, err := store.Update(ctx, h.convs.Store(), kindInbox, ref.Conversation+"/"+ref.Instance, func(data []byte, exists bool) ([]byte, error) {
		next, refused = nil, nil
		if !exists {
			return nil, nil
		}
		var b inbox
		if err := json.Unmarshal(data, &b); err != nil {
			return nil, calf.Permanent(fmt.Errorf("conversation: inbox of %s: %w", ref.Instance, err))
		}
		if b.Current == nil || b.Current.Run != ref.Base || b.Round != ref.Round {
			// Delivered again: what it decided is recorded; the
			// current message, if any, is started again below.
			if b.Current != nil && b.Round == 0 {
				next = b.Current
			}
			return nil, nil
		}
		if !answer {
			b.Round++
			return json.Marshal(b)
		}
		b.done(b.Current.Msg)
		if stopped || failed != "" {
			refused = b.Queue
			for _, e := range b.Queue {
				b.done(e.Msg)
			}
			b.Queue = nil
		}
		if failed != "" {
			b.Failed = failed
		}
		b.start(ref.Instance)
		next = b.Current
		return json.Marshal(b)
	})
	if err != nil {
		return err
	}
	if !answer {
		// After the round is recorded: the next round's output must find
		// it.
		if _, err := h.rt.Client().Emit(ctx, runBlockChannel, block, calf.WithID(derive("runblock", ref.runID())),
			calf.WithKey(ref.runID()), calf.WithMetadata(calf.Metadata{CorrelationID: ref.runID()})); err != nil {
			return err
		}
	}
	why := "conversation " + ref.Conversation + " is stopped"
	if !stopped {
		why = ref.Instance + " is " + string(conversation.StatusError) + ": " + failed
	}
	for _, e := range refused {
		if err := h.reply(ctx, ref.Conversation, ref.Instance, e.From, convid.ErrorPrefix+why,
			e.Correlation, derive("refuse", e.Msg)); err != nil {
			return err
		}
	}
	if next == nil {
		return nil
	}
	return h.submit(ctx, ref.Prototype, &runRef{Conversation: ref.Conversation, Instance: ref.Instance, Prototype: ref.Prototype,
		From: next.From, Correlation: next.Correlation, Msg: next.Msg, Base: next.Run, Blocks: ref.Blocks}, next.Content)
}

// onRunBlock carries out the "# Run" commands of a run's answer, then
// starts the next round: a run in the same session whose input gives the
// results. The commands are idempotent (a spawn, a send with a correlation
// id derived from the run and the command's place), so a block delivered
// again has one effect.
func (h *Host) onRunBlock(ctx context.Context, msg *calf.Message) error {
	var rb runBlock
	if err := msg.Decode(&rb); err != nil {
		return calf.Permanent(err)
	}
	ref := rb.Ref
	var sb strings.Builder
	if rb.Problems != "" {
		sb.WriteString(runblock.ProblemsPrefix + rb.Problems)
	} else {
		sb.WriteString(runblock.ResultsPrefix)
		for i, c := range rb.Commands {
			var res string
			var err error
			switch c.Verb {
			case runblock.VerbStartConversation:
				res, err = h.start(ctx, ref.Conversation, ref.Instance, c.Target)
			case runblock.VerbSend:
				res, err = h.send(ctx, ref.Conversation, ref.Instance, c.Target, c.Args, "", derive("run", ref.runID(), strconv.Itoa(i)))
			default:
				err = fmt.Errorf("unknown verb %q", c.Verb)
			}
			if err != nil {
				if calf.IsUnavailable(err) {
					return err
				}
				res = "error: " + err.Error()
			}
			fmt.Fprintf(&sb, "\n%s %s: %s", c.Verb, c.Target, res)
		}
	}
	ref.Round++
	return h.submit(ctx, ref.Prototype, &ref, sb.String())
}

// agentFor returns the agent that serves the LLM prototype p, serving it
// on the host's runtime the first time.
func (h *Host) agentFor(ctx context.Context, p conversation.Prototype) (*agent.Agent[string], error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if a := h.agents[p.Name]; a != nil {
		return a, nil
	}
	if len(p.MCPServers) > 0 && h.o.MCP == nil {
		return nil, errors.New("it lists MCP servers, and this host connects none (host.Options.MCP)")
	}
	if h.o.Model == nil {
		return nil, errors.New("this host opens no model (host.Options.Model)")
	}
	var extra []tool.Tool
	var sb strings.Builder
	if len(p.Subagents) > 0 {
		st, sd, err := h.conversationTools()
		if err != nil {
			return nil, err
		}
		extra = []tool.Tool{st, sd}
		sb.WriteString("Agents you may start in this conversation with start_conversation, then send commands to with send:")
		for _, name := range p.Subagents {
			sub, err := h.convs.Prototypes().Get(ctx, name)
			desc := ""
			if err == nil {
				desc = strings.TrimSpace(sub.Role + ". " + sub.Description)
			}
			fmt.Fprintf(&sb, "\n- %s: %s", name, strings.TrimSuffix(desc, "."))
		}
	}
	var ao agent.Options
	if h.o.Agent != nil {
		ao = *h.o.Agent
	}
	ao.ToolTimeout = max(ao.ToolTimeout, h.o.SendTimeout+h.o.SendTimeout/4)
	ao.SessionAnswersOnly = !h.o.KeepToolTraffic
	a, err := NewAgent(p, &AgentOptions{
		Name: h.o.AgentPrefix + p.Name, Model: h.o.Model, Tools: h.o.Tools, MCP: h.o.MCP, ExtraTools: extra, Instructions: sb.String(),
		Agent: &ao,
	})
	if err != nil {
		return nil, err
	}
	if err := a.Serve(h.ctx, h.rt, &agent.ServeOptions{Concurrency: h.o.Concurrency, MaxAttempts: h.o.MaxAttempts}); err != nil {
		return nil, err
	}
	h.agents[p.Name] = a
	return a, nil
}
