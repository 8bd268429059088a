package a2a

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	spec "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/internal/httpheader"
	"github.com/calf-go/calf/model"
)

// RemoteOptions configure [NewRemote].
type RemoteOptions struct {
	// Description says what the agent does, for the teams and agents that
	// call it. Default: the card's description.
	Description string
	// Token, when set, is sent as a bearer token with every request.
	Token string
	// HTTPClient makes the requests. Default: a client of its own.
	HTTPClient *http.Client
	// Timeout bounds one exchange with the remote agent (a step of the
	// Calf run that stands for it). Default: agent.DefaultTimeout.
	Timeout time.Duration
	// NoStreaming sends messages without streaming even to an agent whose
	// card says it streams.
	NoStreaming bool
}

// RemoteState is what a remote agent keeps per session: the remote
// conversation (context) the session continues, and the task that waits
// for the session's next message, if any.
type RemoteState struct {
	ContextID string `json:"context_id,omitempty"`
	TaskID    string `json:"task_id,omitempty"`
}

// Remote is a remote A2A agent as a Calf agent: see [NewRemote].
type Remote = agent.Custom[RemoteState, string]

// ErrRemote is matched by the error of a run whose remote task failed, was
// rejected or cancelled.
var ErrRemote = errors.New("a2a: the remote agent did not complete the task")

// NewRemote returns a Calf agent named name that stands for the A2A agent
// whose card is at cardURL (its base URL, or the card's own URL). It is a
// custom agent ([agent.NewCustom]): each run sends the run's last message
// to the remote agent and answers with the remote task's result, so it
// goes where agents go: a team member (team.AgentMember(r.Agent)), a
// subagent (agent.AsTool(r.Agent, nil)), a handoff target. Serve it like
// any agent.
//
// Within a session, the runs continue one remote conversation (the A2A
// context), and a remote task that asks for input takes the session's next
// message. The first message of a conversation carries the earlier
// messages as context, so a handoff target knows what was said. The
// remote task's status updates and artifacts are the run's custom events
// (types "a2a.status" and "a2a.artifact"), in RunStream as they stream.
// A task that fails, is rejected or cancelled fails the run (an error
// matching [ErrRemote] in the run's reason); one that needs input answers
// with its question. A run that times out or is cancelled cancels the
// remote task.
//
// NewRemote reads the card now: an unreachable URL, or one that does not
// serve an agent card, is an error.
func NewRemote(ctx context.Context, name, cardURL string, opts *RemoteOptions) (*Remote, error) {
	var o RemoteOptions
	if opts != nil {
		o = *opts
	}
	client, card, err := Connect(ctx, cardURL, &o)
	if err != nil {
		return nil, err
	}
	desc := o.Description
	if desc == "" {
		desc = card.Description
	}
	rc := &remoteCall{client: client, card: card, stream: card.Capabilities.Streaming && !o.NoStreaming}
	return agent.NewCustom(name, rc.step, &agent.CustomOptions{Description: desc, StepTimeout: o.Timeout, Timeout: o.Timeout})
}

// Connect reads the agent card at cardURL (a base URL, or the card's own
// URL) and returns an SDK client for the agent, over the first of its
// interfaces that speaks JSON-RPC or REST, with opts' token and HTTP
// client.
func Connect(ctx context.Context, cardURL string, opts *RemoteOptions) (*a2aclient.Client, *spec.AgentCard, error) {
	var o RemoteOptions
	if opts != nil {
		o = *opts
	}
	var h http.Header
	if o.Token != "" {
		h = http.Header{"Authorization": {"Bearer " + o.Token}}
	}
	hc := httpheader.Client(o.HTTPClient, h)
	card, err := resolveCard(ctx, hc, cardURL)
	if err != nil {
		return nil, nil, err
	}
	client, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithJSONRPCTransport(hc), a2aclient.WithRESTTransport(hc))
	if err != nil {
		return nil, nil, fmt.Errorf("a2a: agent %s at %s: %w", card.Name, cardURL, err)
	}
	return client, card, nil
}

// resolveCard reads the agent card at u: a base URL (the card at its
// well-known path) or the card's URL.
func resolveCard(ctx context.Context, hc *http.Client, u string) (*spec.AgentCard, error) {
	pu, err := url.Parse(u)
	if err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
		return nil, fmt.Errorf("a2a: card URL %q is not an http or https URL", u)
	}
	var ropts []agentcard.ResolveOption
	if strings.HasSuffix(pu.Path, ".json") {
		ropts = append(ropts, agentcard.WithPath(""))
	}
	card, err := agentcard.NewResolver(hc).Resolve(ctx, u, ropts...)
	if err != nil {
		return nil, fmt.Errorf("a2a: read the agent card at %s: %w", u, err)
	}
	if card.Name == "" || len(card.SupportedInterfaces) == 0 {
		return nil, fmt.Errorf("a2a: %s does not serve an agent card (no name or no interfaces)", u)
	}
	return card, nil
}

type remoteCall struct {
	client *a2aclient.Client
	card   *spec.AgentCard
	stream bool
}

// prompt is what the run sends: its last message and, to start a remote
// conversation, the messages before it.
func prompt(in []model.Message, first bool) string {
	last := in[len(in)-1].Text()
	if !first || len(in) == 1 {
		return last
	}
	var b strings.Builder
	b.WriteString("The conversation so far:\n")
	for _, m := range in[:len(in)-1] {
		if t := m.Text(); t != "" && (m.Role == model.RoleUser || m.Role == model.RoleAssistant) {
			fmt.Fprintf(&b, "%s: %s\n", m.Role, t)
		}
	}
	b.WriteString("\nThe request:\n")
	b.WriteString(last)
	return b.String()
}

// PartsText returns the text of parts: text parts as they are, data parts
// as their JSON, one after the other.
func PartsText(parts spec.ContentParts) string {
	var b strings.Builder
	for _, p := range parts {
		if t := p.Text(); t != "" {
			b.WriteString(t)
		} else if d := p.Data(); d != nil {
			raw, _ := json.Marshal(d)
			b.Write(raw)
		}
	}
	return b.String()
}

func (rc *remoteCall) step(sc *agent.StepContext[RemoteState], in []model.Message) (string, error) {
	st := sc.State
	msg := spec.NewMessage(spec.MessageRoleUser, spec.NewTextPart(prompt(in, st.ContextID == "")))
	// The same id when a step runs again, for a server that drops
	// repeated messages.
	msg.ID = fmt.Sprintf("%s.%d", sc.RunID, sc.Step)
	msg.ContextID = st.ContextID
	msg.TaskID = spec.TaskID(st.TaskID)
	req := &spec.SendMessageRequest{Message: msg}

	var reply *spec.Message
	artifacts := map[spec.ArtifactID]string{}
	var order []spec.ArtifactID
	addArtifact := func(a *spec.Artifact, appendText bool) {
		if _, seen := artifacts[a.ID]; !seen {
			order = append(order, a.ID)
		}
		t := PartsText(a.Parts)
		if appendText {
			artifacts[a.ID] += t
		} else {
			artifacts[a.ID] = t
		}
	}
	var taskID spec.TaskID
	var state spec.TaskState
	var statusText string
	applyTask := func(t *spec.Task) {
		taskID, st.ContextID, state = t.ID, t.ContextID, t.Status.State
		if t.Status.Message != nil {
			statusText = PartsText(t.Status.Message.Parts)
		}
		for _, a := range t.Artifacts {
			addArtifact(a, false)
		}
	}
	err := func() error {
		if !rc.stream {
			res, err := rc.client.SendMessage(sc, req)
			if err != nil {
				return err
			}
			switch r := res.(type) {
			case *spec.Task:
				applyTask(r)
			case *spec.Message:
				reply = r
			}
			return nil
		}
		for ev, err := range rc.client.SendStreamingMessage(sc, req) {
			if err != nil {
				return err
			}
			switch e := ev.(type) {
			case *spec.Task:
				applyTask(e)
			case *spec.Message:
				reply = e
			case *spec.TaskStatusUpdateEvent:
				taskID, st.ContextID = e.TaskID, e.ContextID
				state = e.Status.State
				if e.Status.Message != nil {
					statusText = PartsText(e.Status.Message.Parts)
				}
				_ = sc.EmitEvent("a2a.status", map[string]string{"task_id": string(e.TaskID), "state": string(state), "text": statusText})
			case *spec.TaskArtifactUpdateEvent:
				addArtifact(e.Artifact, e.Append)
				_ = sc.EmitEvent("a2a.artifact", map[string]string{"task_id": string(e.TaskID), "text": PartsText(e.Artifact.Parts)})
			}
		}
		return nil
	}()
	if err != nil {
		if sc.Err() != nil && taskID != "" {
			// The run stops waiting: so does the remote agent.
			cctx, cancel := context.WithTimeout(context.WithoutCancel(sc), 5*time.Second)
			_, _ = rc.client.CancelTask(cctx, &spec.CancelTaskRequest{ID: taskID})
			cancel()
		}
		return "", fmt.Errorf("a2a: agent %s: %w", rc.card.Name, err)
	}
	if reply != nil {
		if reply.ContextID != "" {
			st.ContextID = reply.ContextID
		}
		st.TaskID = ""
		return PartsText(reply.Parts), nil
	}
	st.TaskID = ""
	switch state {
	case spec.TaskStateCompleted:
		var b strings.Builder
		for _, id := range order {
			b.WriteString(artifacts[id])
		}
		if b.Len() == 0 {
			return statusText, nil
		}
		return b.String(), nil
	case spec.TaskStateInputRequired, spec.TaskStateAuthRequired:
		st.TaskID = string(taskID)
		return statusText, nil
	case spec.TaskStateFailed, spec.TaskStateRejected, spec.TaskStateCanceled:
		return "", fmt.Errorf("%w: agent %s: task %s %s: %s", ErrRemote, rc.card.Name, taskID, strings.ToLower(strings.TrimPrefix(string(state), "TASK_STATE_")), statusText)
	}
	return "", fmt.Errorf("%w: agent %s: task %s ended the exchange in state %s", ErrRemote, rc.card.Name, taskID, state)
}
