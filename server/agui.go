package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/agent/approval"
	"github.com/calf-go/calf/eventlog"
	"github.com/calf-go/calf/internal/httperr"
	"github.com/calf-go/calf/runner"
	"github.com/calf-go/calf/store"
)

// aguiInput is the part of an AG-UI RunAgentInput that the server reads.
// The client's tools, context, state and forwarded properties are not the
// agent's and are ignored.
type aguiInput struct {
	ThreadID string        `json:"threadId"`
	RunID    string        `json:"runId"`
	Messages []aguiMessage `json:"messages"`
	Resume   []aguiResume  `json:"resume"`
}

type aguiMessage struct {
	ID      string  `json:"id"`
	Role    string  `json:"role"`
	Content content `json:"content"`
}

type aguiResume struct {
	InterruptID string          `json:"interruptId"`
	Status      string          `json:"status"`
	Payload     json.RawMessage `json:"payload"`
}

// aguiAnswer is the payload of a resume entry that answers an approval:
// {"approved": false} denies it, with message told to the model;
// arguments approve the call with other arguments. A resolved entry with
// no payload approves.
type aguiAnswer struct {
	Approved  *bool           `json:"approved"`
	Message   string          `json:"message"`
	Arguments json.RawMessage `json:"arguments"`
}

// aguiInterrupt is an AG-UI Interrupt: an approval the run waits for.
type aguiInterrupt struct {
	ID             string          `json:"id"`
	Reason         string          `json:"reason"`
	Message        string          `json:"message,omitempty"`
	ToolCallID     string          `json:"toolCallId,omitempty"`
	ResponseSchema json.RawMessage `json:"responseSchema,omitempty"`
	ExpiresAt      string          `json:"expiresAt,omitempty"`
	Metadata       map[string]any  `json:"metadata,omitempty"`
}

// approvalSchema is the responseSchema of an approval interrupt.
var approvalSchema = json.RawMessage(`{"type":"object","properties":{"approved":{"type":"boolean"},"message":{"type":"string"},"arguments":{"type":"object"}}}`)

// agui serves POST /agui/{agent}: the AG-UI protocol over server-sent
// events. A run starts in the Calf session named by threadId, with the
// last user message as its prompt; its events come from the event log as
// AG-UI events; a run that waits for an approval finishes with an
// interrupt outcome, and the next request's resume entries answer it and
// stream the rest of the same Calf run.
func (s *Server) agui(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("agent")
	rn, ok := s.runners[name]
	if !ok {
		httperr.Write(w, &httperr.Error{Kind: store.ErrNotFound, Code: "model_not_found", Message: fmt.Sprintf("no agent %q here", name)})
		return
	}
	st, ok := rn.(runner.Submitter)
	if !ok || runner.KindOf(rn) != runner.KindAgent {
		s.requestError(w, r, fmt.Errorf("%w: %s is not an agent: AG-UI serves agents", errBadRequest, name))
		return
	}
	var in aguiInput
	if err := decodeBody(r, &in); err != nil {
		s.requestError(w, r, err)
		return
	}
	if in.ThreadID == "" || in.RunID == "" {
		s.requestError(w, r, fmt.Errorf("%w: threadId and runId are required", errBadRequest))
		return
	}
	ctx, user := r.Context(), userOf(r)
	if err := s.claimSession(ctx, user, in.ThreadID); err != nil {
		s.requestError(w, r, err)
		return
	}
	var run string
	started := false // this request started the run (rather than resumed it)
	var after int64
	if len(in.Resume) > 0 {
		var err error
		if run, after, err = s.aguiResume(r, in); err != nil {
			s.requestError(w, r, err)
			return
		}
	} else {
		// The session holds the history: the prompt is the last user message.
		prompt, found := "", false
		for _, m := range in.Messages {
			if m.Role == "user" {
				prompt, found = m.Content.text, true
			}
		}
		if !found {
			s.requestError(w, r, fmt.Errorf("%w: no user message", errBadRequest))
			return
		}
		opts := s.runOptions(user, runner.Options{RunID: calf.NewID(), SessionID: in.ThreadID})
		if err := s.ownRun(ctx, user, opts.RunID); err != nil {
			s.requestError(w, r, err)
			return
		}
		var err error
		if run, err = st.Submit(ctx, s.rt, prompt, opts); err != nil {
			s.requestError(w, r, err)
			return
		}
		started = true
	}
	w.Header().Set(RunHeader, run)
	ev := newSSE(w)
	send := func(typ string, fields map[string]any) bool {
		fields["type"] = typ
		fields["timestamp"] = time.Now().UnixMilli()
		return ev.event("", fields) == nil
	}
	if !send("RUN_STARTED", map[string]any{"threadId": in.ThreadID, "runId": in.RunID}) {
		return
	}
	tr := aguiTranslator{run: run, send: send}
	finish := func(outcome map[string]any, result any) {
		tr.closeText()
		f := map[string]any{"threadId": in.ThreadID, "runId": in.RunID, "metadata": map[string]any{"calfRunId": run}}
		if outcome != nil {
			f["outcome"] = outcome
		}
		if result != nil {
			f["result"] = result
		}
		send("RUN_FINISHED", f)
	}
	wctx, seen := ctx, func(*calf.Message) {}
	if started {
		var stop func()
		wctx, seen, stop = s.watchStart(ctx, rn, run)
		defer stop()
	}
	watch := run
	for e, err := range s.opts.Log.Follow(wctx, run, after) {
		if err != nil {
			if nerr := s.notServedError(ctx, wctx, rn, run); nerr != nil {
				send("RUN_ERROR", map[string]any{"message": nerr.Error(), "code": "not_served"})
				return
			}
			if ctx.Err() == nil {
				send("RUN_ERROR", map[string]any{"message": err.Error(), "code": "log_failed"})
			}
			return
		}
		seen(e.Message)
		var ended bool
		ended, watch = eventlog.Ended(e, watch)
		aev, err := agent.DecodeEvent(e.Message)
		if err != nil {
			continue // not an agent's event (a team's, a workflow's)
		}
		if aev.RunID != watch && !ended {
			continue // a subagent's events, or a run of the chain before
		}
		switch aev.Kind {
		case agent.EventApproval:
			if aev.Approval.Status != approval.Pending {
				continue
			}
			a := aev.Approval
			intr := aguiInterrupt{
				ID: a.ID, Reason: "tool_approval", ToolCallID: a.ToolCallID, ResponseSchema: approvalSchema,
				Message:  fmt.Sprintf("%s wants to call %s with %s", a.Agent, a.ToolName, a.Arguments),
				Metadata: map[string]any{"toolName": a.ToolName, "arguments": a.Arguments, "reason": a.Reason, "calfRunId": a.RunID},
			}
			if !a.ExpiresAt.IsZero() {
				intr.ExpiresAt = a.ExpiresAt.UTC().Format(time.RFC3339)
			}
			finish(map[string]any{"type": "interrupt", "interrupts": []aguiInterrupt{intr}}, nil)
			return
		case agent.EventOutput:
			if !ended {
				continue
			}
			switch aev.Output.Status {
			case agent.OutputComplete:
				var text string
				if json.Unmarshal(aev.Output.Content, &text) != nil {
					text = string(aev.Output.Content)
				}
				tr.final(text)
				finish(nil, nil)
			case agent.OutputCancelled:
				finish(map[string]any{"type": "cancelled"}, nil)
			default:
				tr.closeText()
				send("RUN_ERROR", map[string]any{"message": aev.Output.Error, "code": "run_" + aev.Output.Status})
			}
			return
		default:
			if !tr.event(aev) {
				return
			}
		}
	}
}

// aguiResume answers the approvals that the resume entries of in name,
// and returns the run they belong to and the point of its log to stream
// from: after the first request among them.
func (s *Server) aguiResume(r *http.Request, in aguiInput) (string, int64, error) {
	ctx, user := r.Context(), userOf(r)
	run := ""
	for _, e := range in.Resume {
		a, err := s.approvalOf(ctx, user, "interrupt", e.InterruptID)
		if err != nil {
			return "", 0, err
		}
		if a.SessionID != in.ThreadID {
			return "", 0, fmt.Errorf("%w: interrupt %s is not of thread %s", errBadRequest, e.InterruptID, in.ThreadID)
		}
		if run != "" && a.RunID != run {
			return "", 0, fmt.Errorf("%w: the interrupts answered belong to different runs", errBadRequest)
		}
		run = a.RunID
		ans := approval.Answer{Approve: e.Status == "resolved", Digest: a.Digest}
		if len(e.Payload) > 0 && string(e.Payload) != "null" {
			var p aguiAnswer
			if err := json.Unmarshal(e.Payload, &p); err != nil {
				return "", 0, fmt.Errorf("%w: the payload of interrupt %s: %v", errBadRequest, e.InterruptID, err)
			}
			if p.Approved != nil && !*p.Approved {
				ans.Approve = false
			}
			ans.Message, ans.Arguments = p.Message, p.Arguments
		}
		if e.Status != "resolved" && e.Status != "cancelled" {
			return "", 0, fmt.Errorf("%w: resume status %q is not resolved or cancelled", errBadRequest, e.Status)
		}
		if _, err := s.rt.Respond(ctx, a.ID, ans); err != nil && !errors.Is(err, approval.ErrAnswered) {
			return "", 0, fmt.Errorf("%w: answer %s: %v", errBadRequest, a.ID, err)
		}
	}
	// Stream from after the request of the first approval answered.
	evs, err := s.opts.Log.Read(ctx, run, 0, 0)
	if err != nil {
		return "", 0, err
	}
	for _, e := range evs {
		if aev, err := agent.DecodeEvent(e.Message); err == nil && aev.Kind == agent.EventApproval && aev.Approval.Status == approval.Pending {
			for _, res := range in.Resume {
				if aev.Approval.ID == res.InterruptID {
					return run, e.Seq, nil
				}
			}
		}
	}
	return run, 0, nil
}

// aguiTranslator turns a run's agent events into AG-UI events: each
// model call's text a text message, its tool calls and their results.
type aguiTranslator struct {
	run   string
	send  func(string, map[string]any) bool
	msgID string // the open text message, if any
	step  int
	text  string // the text of the current model call
}

func (t *aguiTranslator) openText() bool {
	if t.msgID != "" {
		return true
	}
	t.msgID = fmt.Sprintf("%s.msg.%d", t.run, t.step)
	return t.send("TEXT_MESSAGE_START", map[string]any{"messageId": t.msgID, "role": "assistant"})
}

func (t *aguiTranslator) closeText() bool {
	if t.msgID == "" {
		return true
	}
	id := t.msgID
	t.msgID = ""
	return t.send("TEXT_MESSAGE_END", map[string]any{"messageId": id})
}

// event translates one event; false when the client is gone.
func (t *aguiTranslator) event(ev agent.Event) bool {
	switch ev.Kind {
	case agent.EventInference:
		if !t.closeText() {
			return false
		}
		t.step, t.text = ev.Step, ""
		return true
	case agent.EventDelta:
		if ev.Delta == nil || ev.Delta.Text == "" {
			return true
		}
		if !t.openText() {
			return false
		}
		t.text += ev.Delta.Text
		return t.send("TEXT_MESSAGE_CONTENT", map[string]any{"messageId": t.msgID, "delta": ev.Delta.Text})
	case agent.EventToolCall:
		if !t.closeText() {
			return false
		}
		c := ev.ToolCall
		parent := fmt.Sprintf("%s.msg.%d", t.run, c.Step)
		return t.send("TOOL_CALL_START", map[string]any{"toolCallId": c.ToolCallID, "toolCallName": c.ToolName, "parentMessageId": parent}) &&
			t.send("TOOL_CALL_ARGS", map[string]any{"toolCallId": c.ToolCallID, "delta": c.Arguments}) &&
			t.send("TOOL_CALL_END", map[string]any{"toolCallId": c.ToolCallID})
	case agent.EventToolResult:
		res := ev.ToolResult
		content := ""
		if res.Result != nil {
			content = res.Result.Text()
		}
		return t.send("TOOL_CALL_RESULT", map[string]any{"messageId": fmt.Sprintf("%s.result.%s", t.run, res.ToolCallID), "toolCallId": res.ToolCallID, "content": content, "role": "tool"})
	}
	return true
}

// final makes sure the client has the run's answer as the last text
// message: the last model call's text when it streamed it, or else the
// output as a message of its own.
func (t *aguiTranslator) final(text string) {
	if t.msgID != "" && t.text == text {
		t.closeText()
		return
	}
	t.closeText()
	if text == "" {
		return
	}
	t.step++
	if t.openText() {
		t.send("TEXT_MESSAGE_CONTENT", map[string]any{"messageId": t.msgID, "delta": text})
		t.closeText()
	}
}
