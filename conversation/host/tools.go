package host

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/conversation"
	"github.com/calf-go/calf/internal/convid"
	"github.com/calf-go/calf/tool"
)

// The names of the tools an LLM instance whose prototype has subagents
// gets.
const (
	startToolName = "start_conversation"
	sendToolName  = "send"
)

type startArgs struct {
	Prototype string `json:"prototype" jsonschema:"the name of the prototype to start, one of the agents listed in your instructions"`
}

type startResult struct {
	// Agent is the started instance's id.
	Agent string `json:"agent"`
}

type sendArgs struct {
	Agent   string   `json:"agent" jsonschema:"the agent: the prototype's name or the id start_conversation returned"`
	Command []string `json:"command,omitempty" jsonschema:"the command and its arguments, such as [\"docmem-create\", \"project-notes\"]"`
	Message string   `json:"message,omitempty" jsonschema:"text for the agent, for agents that take text"`
}

// conversationTools returns the start_conversation and send tools. They
// find their conversation and their instance from the run: its session id
// is the instance's id.
func (h *Host) conversationTools() (start, send tool.Tool, err error) {
	start, err = tool.New(startToolName,
		"Start an agent of the given prototype in this conversation (once; starting it again returns the same agent). Returns its id, for send.",
		func(ctx context.Context, in startArgs) (startResult, error) {
			_, conv, self, err := runInstance(ctx)
			if err != nil {
				return startResult{}, err
			}
			id, err := h.start(ctx, conv, self, in.Prototype)
			return startResult{Agent: id}, err
		})
	if err != nil {
		return nil, nil, err
	}
	send, err = tool.New(sendToolName,
		"Send a command to an agent of this conversation that you started, and return its answer.",
		func(ctx context.Context, in sendArgs) (string, error) {
			rc, conv, self, err := runInstance(ctx)
			if err != nil {
				return "", err
			}
			if len(in.Command) == 0 && in.Message == "" {
				return "", errors.New("give a command or a message")
			}
			return h.send(ctx, conv, self, in.Agent, in.Command, in.Message, derive("send", rc.RunID, rc.ToolCallID))
		})
	return start, send, err
}

// runInstance returns the run of a tool call's ctx, and the conversation
// and the instance of that run, one the host started: its session id is
// the instance's id.
func runInstance(ctx context.Context) (rc agent.RunContext, conv, instance string, err error) {
	rc, ok := agent.FromContext(ctx)
	if !ok {
		return rc, "", "", errors.New("called outside an agent run")
	}
	_, conv, ok = convid.SplitInstanceID(rc.SessionID)
	if !ok {
		return rc, "", "", fmt.Errorf("the run %s is not one of a conversation's instances", rc.RunID)
	}
	return rc, conv, rc.SessionID, nil
}

// start spawns prototype in the conversation for instance parent.
func (h *Host) start(ctx context.Context, conv, parent, prototype string) (string, error) {
	inst, err := h.convs.Spawn(ctx, conv, parent, prototype)
	if err != nil {
		return "", err
	}
	return inst.ID, nil
}

// send sends a message from instance from to an instance of the
// conversation, named by its id or its prototype's name, with the
// correlation id corr, and returns the text of its answer. The wait is
// bounded by Options.SendTimeout; an answer that is an error
// ([.ConversationMessage.IsError]) is returned as an error.
func (h *Host) send(ctx context.Context, conv, from, target string, command []string, message, corr string) (string, error) {
	to := target
	if _, c, ok := convid.SplitInstanceID(target); !ok || c != conv {
		if err := convid.CheckName(target); err != nil {
			return "", fmt.Errorf("no agent %q in this conversation", target)
		}
		to = convid.InstanceID(target, conv)
	}
	ch, err := h.convs.Route(ctx, conv, from, to)
	if err != nil {
		return "", err
	}
	c := h.rt.Client()
	m := conversation.ConversationMessage{ConversationID: conv, AgentID: from, Message: message, Command: command,
		Timestamp: c.Now().UTC(), CorrelationID: corr}
	if err := m.Validate(); err != nil {
		return "", err
	}
	// The request's id is new each time it is sent: a tool call executed
	// again after a crash sends its request again, with the same
	// correlation id, past the duplicate window of a broker that drops
	// repeated ids (the first answer went to a wait that ended with the
	// crash). The delivery's attempt would not do: on NATS a tool call
	// taken over from a killed worker was seen to come with attempt 1
	// (TestKillConversationWorker in internal/e2e).
	rctx, cancel := context.WithTimeout(ctx, h.o.SendTimeout)
	defer cancel()
	reply, err := c.Request(rctx, ch, m, replyChannel, calf.WithID(derive("request", corr, calf.NewID())), calf.WithKey(conv),
		calf.WithMetadata(calf.Metadata{CorrelationID: corr}))
	if err != nil {
		if ctx.Err() == nil && rctx.Err() != nil {
			return "", fmt.Errorf("%s did not answer within %s", to, h.o.SendTimeout)
		}
		return "", err
	}
	rm, err := conversation.DecodeMessage(reply.Data)
	if err != nil {
		return "", fmt.Errorf("the answer of %s: %w", to, err)
	}
	if text, ok := strings.CutPrefix(rm.Message, convid.ErrorPrefix); ok {
		return "", fmt.Errorf("%s: %s", to, text)
	}
	return rm.Message, nil
}
