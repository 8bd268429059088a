package openai

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/internal/transport"
)

// ResponsesModel is a [model.Model] that calls OpenAI's Responses API
// (POST /v1/responses), the API of OpenAI's reasoning models: their
// reasoning comes back as thinking parts (a summary, when
// [Options.ReasoningSummary] asks for one, and the encrypted reasoning),
// which go back to the model with the rest of the conversation on the next
// turn. Nothing is stored at OpenAI unless [Options.Store] says so. It
// also streams. A ResponsesModel is safe for concurrent use.
type ResponsesModel struct {
	ep  *endpoint
	url string
	// store, effort and summary are Options.Store, ReasoningEffort and
	// ReasoningSummary.
	store           bool
	effort, summary string
}

var (
	_ model.Model    = (*ResponsesModel)(nil)
	_ model.Streamer = (*ResponsesModel)(nil)
)

// NewResponses returns a model of the Responses API configured by opts,
// as [New] configures one of chat completions; the errors are New's.
func NewResponses(opts Options) (*ResponsesModel, error) {
	ep, err := newEndpoint(opts)
	if err != nil {
		return nil, err
	}
	return &ResponsesModel{ep: ep, url: ep.url("responses"), store: opts.Store,
		effort: opts.ReasoningEffort, summary: opts.ReasoningSummary}, nil
}

// Name returns "openai-responses:" followed by the model name.
func (m *ResponsesModel) Name() string { return "openai-responses:" + m.ep.model }

// Generate sends req to the Responses API and returns the response.
//
// Errors: an HTTP error from the server, or a response whose status is
// "failed", is a *[model.StatusError] (for a failed response, its Code is
// the response's error code and its StatusCode the HTTP status that stands
// for it: 429 for a rate limit, 400 for a refused prompt, else 500); a
// request that runs out of time (ctx's deadline or [Options.Timeout])
// matches [model.ErrTimeout] and, when that was the cause,
// [context.DeadlineExceeded]; a cancelled ctx yields ctx's error.
func (m *ResponsesModel) Generate(ctx context.Context, req *model.Request) (*model.Response, error) {
	body, err := m.body(req, false)
	if err != nil {
		return nil, err
	}
	var r respResponse
	if err := m.ep.postJSON(ctx, m.url, body, &r, "a JSON response object"); err != nil {
		return nil, err
	}
	return m.response(&r)
}

// GenerateStream sends req to the Responses API as a stream. It yields
// text deltas (response.output_text.delta), thinking deltas (the reasoning
// summary's response.reasoning_summary_text.delta) and tool-call deltas
// (a call's id and name when its item is added, then
// response.function_call_arguments.delta), and last the complete response
// of the response.completed or response.incomplete event. An "error"
// event or a response.failed event is a *[model.StatusError]; a stream
// that ends before its response does is an error matching
// [io.ErrUnexpectedEOF]. Other errors are those of
// [ResponsesModel.Generate].
func (m *ResponsesModel) GenerateStream(ctx context.Context, req *model.Request) iter.Seq2[model.Chunk, error] {
	return func(yield func(model.Chunk, error) bool) {
		body, err := m.body(req, true)
		if err != nil {
			yield(model.Chunk{}, err)
			return
		}
		resp, err := m.ep.do(ctx, m.url, body)
		if err != nil {
			yield(model.Chunk{}, err)
			return
		}
		defer resp.Close()
		m.stream(ctx, transport.NewSSEReader(resp.Body), yield)
	}
}

// stream reads the events of a streamed response and yields its chunks.
func (m *ResponsesModel) stream(ctx context.Context, events *transport.SSEReader, yield func(model.Chunk, error) bool) {
	tools := map[int]int{}           // output index → tool call index
	done := map[int]respOutputItem{} // the items done, by output index
	malformed := func(why string, err error) {
		if err != nil {
			why += ": " + err.Error()
		}
		yield(model.Chunk{}, fmt.Errorf("openai: %s: malformed stream event: %s", m.ep.model, why))
	}
	for {
		sse, err := events.Next()
		if errors.Is(err, io.EOF) {
			yield(model.Chunk{}, m.ep.errStreamCut())
			return
		}
		if err != nil {
			yield(model.Chunk{}, m.ep.readError(ctx, err))
			return
		}
		if sse.Data == "[DONE]" {
			continue
		}
		var ev respEvent
		if err := json.Unmarshal([]byte(sse.Data), &ev); err != nil {
			malformed(sse.Event, err)
			return
		}
		var delta *model.Delta
		switch ev.Type {
		case "response.output_text.delta", "response.refusal.delta":
			delta = &model.Delta{Text: ev.Delta}
		case "response.reasoning_summary_text.delta":
			delta = &model.Delta{Thinking: ev.Delta}
		case "response.output_item.added":
			if ev.Item != nil && ev.Item.Type == "function_call" {
				if _, dup := tools[ev.OutputIndex]; dup {
					malformed("output item "+strconv.Itoa(ev.OutputIndex)+" added twice", nil)
					return
				}
				i := len(tools)
				tools[ev.OutputIndex] = i
				delta = &model.Delta{ToolCall: &model.ToolCallDelta{Index: i, ID: ev.Item.CallID, Name: ev.Item.Name, Arguments: ev.Item.Arguments}}
			}
		case "response.function_call_arguments.delta":
			i, ok := tools[ev.OutputIndex]
			if !ok {
				malformed("arguments of output item "+strconv.Itoa(ev.OutputIndex)+", which is no function call", nil)
				return
			}
			delta = &model.Delta{ToolCall: &model.ToolCallDelta{Index: i, Arguments: ev.Delta}}
		case "response.output_item.done":
			if ev.Item != nil {
				done[ev.OutputIndex] = *ev.Item
			}
		case "response.completed", "response.incomplete", "response.failed":
			if ev.Response == nil {
				malformed(ev.Type+" without a response", nil)
				return
			}
			r := ev.Response
			if len(r.Output) == 0 {
				// A server that leaves the output out of the last event
				// has sent it item by item.
				for _, i := range slices.Sorted(maps.Keys(done)) {
					r.Output = append(r.Output, done[i])
				}
			}
			resp, err := m.response(r)
			if err != nil {
				yield(model.Chunk{}, err)
				return
			}
			yield(model.Chunk{Response: resp}, nil)
			return
		case "error":
			if ev.Error != nil {
				yield(model.Chunk{}, ev.Error.statusError())
			} else {
				yield(model.Chunk{}, streamError("", rawCode(ev.Code), ev.Message))
			}
			return
		}
		if delta != nil && (delta.Text != "" || delta.Thinking != "" || delta.ToolCall != nil) {
			if !yield(model.Chunk{Delta: delta}, nil) {
				return
			}
		}
	}
}

// body encodes req as the JSON body of a Responses API request.
func (m *ResponsesModel) body(req *model.Request, stream bool) ([]byte, error) {
	w, err := m.request(req)
	if err != nil {
		return nil, err
	}
	w.Stream = stream
	body, err := json.Marshal(w)
	if err != nil {
		return nil, encodeError(req, err)
	}
	return body, nil
}

// request converts req into the body of a Responses API request.
func (m *ResponsesModel) request(req *model.Request) (*respRequest, error) {
	p := &respRequest{Model: m.ep.wireModel, Store: m.store}
	if !m.store {
		// Without a stored response to refer to, reasoning goes back to
		// the model as the encrypted content it came with.
		p.Include = []string{"reasoning.encrypted_content"}
	}
	if m.effort != "" || m.summary != "" {
		p.Reasoning = &respReasoning{Effort: m.effort, Summary: m.summary}
	}
	instructions, input, err := respInput(model.ForProvider(req.Messages, "openai"))
	if err != nil {
		return nil, fmt.Errorf("openai: %w", err)
	}
	p.Instructions, p.Input = instructions, input
	if len(req.Tools) > 0 {
		p.Tools = make([]respTool, len(req.Tools))
		for i, t := range req.Tools {
			params, err := parameters(t.Parameters)
			if err != nil {
				return nil, fmt.Errorf("openai: tool %q: parameters: %w", t.Name, err)
			}
			// strict is sent false: the Responses API makes it true when
			// left out, and strict mode refuses the schemas that do not
			// list every property as required.
			p.Tools[i] = respTool{Type: "function", Name: t.Name, Description: t.Description, Parameters: params}
		}
		p.ParallelToolCalls = req.ParallelToolCalls
	}
	switch c := req.ToolChoice; c {
	case "":
	case model.ToolChoiceAuto, model.ToolChoiceNone, model.ToolChoiceRequired:
		p.ToolChoice = json.RawMessage(`"` + string(c) + `"`)
	default:
		named, err := json.Marshal(map[string]string{"type": "function", "name": string(c)})
		if err != nil {
			return nil, fmt.Errorf("openai: tool choice: %w", err)
		}
		p.ToolChoice = named
	}
	if o := req.Output; o != nil {
		p.Text = &respText{Format: respFormat{Type: "json_schema", Name: cmp.Or(o.Name, "output"), Schema: o.Schema, Strict: o.Strict}}
	}
	p.Temperature = req.Temperature
	if req.MaxTokens > 0 {
		p.MaxOutputTokens = req.MaxTokens
	}
	return p, nil
}

// respInput converts the conversation into the instructions (the system
// messages' text) and the input items: messages, the reasoning, function
// calls and function call outputs of earlier turns. Images in tool
// messages, which a function call output cannot hold, move to a user
// message after the run of tool messages they belong to.
func respInput(msgs []model.Message) (string, []any, error) {
	var instructions []string
	input := make([]any, 0, len(msgs))
	var toolImages []respContent
	flush := func() {
		if len(toolImages) > 0 {
			input = append(input, respMessage{Role: "user", Content: toolImages})
			toolImages = nil
		}
	}
	for i, msg := range msgs {
		if msg.Role != model.RoleTool {
			flush()
		}
		switch msg.Role {
		case model.RoleSystem:
			if hasImage(msg.Parts) {
				return "", nil, fmt.Errorf("messages[%d]: a system message cannot hold images", i)
			}
			instructions = append(instructions, msg.Text())
		case model.RoleUser:
			content := make([]respContent, 0, len(msg.Parts))
			for _, p := range msg.Parts {
				if p.Type == model.PartThinking {
					continue
				}
				c, err := respPart(p, "input_text")
				if err != nil {
					return "", nil, fmt.Errorf("messages[%d]: %w", i, err)
				}
				content = append(content, c)
			}
			if len(content) == 0 {
				content = append(content, respContent{Type: "input_text"})
			}
			input = append(input, respMessage{Role: "user", Content: content})
		case model.RoleAssistant:
			if hasImage(msg.Parts) {
				return "", nil, fmt.Errorf("messages[%d]: an assistant message cannot hold images", i)
			}
			input = appendAssistant(input, msg)
		case model.RoleTool:
			text := msg.Text()
			if hasImage(msg.Parts) {
				if text == "" {
					text = "The result is the image in the next message."
				}
				toolImages = append(toolImages, respContent{Type: "input_text", Text: "Images returned by tool call " + msg.ToolCallID + ":"})
				for _, p := range msg.Parts {
					if p.Type != model.PartImage {
						continue
					}
					c, err := respPart(p, "input_text")
					if err != nil {
						return "", nil, fmt.Errorf("messages[%d]: %w", i, err)
					}
					toolImages = append(toolImages, c)
				}
			}
			input = append(input, respFunctionCallOutput{Type: "function_call_output", CallID: msg.ToolCallID, Output: text})
		default:
			return "", nil, fmt.Errorf("messages[%d]: unknown role %q", i, msg.Role)
		}
	}
	flush()
	return strings.Join(instructions, "\n\n"), input, nil
}

// appendAssistant appends an assistant message's items in their order:
// reasoning items (consecutive thinking parts with the same id make one
// item, their texts its summary), messages of its text, then its function
// calls. A thinking part without an id, which no OpenAI model produced,
// is left out.
func appendAssistant(input []any, msg model.Message) []any {
	var text []respContent
	flushText := func() {
		if len(text) > 0 {
			input = append(input, respMessage{Role: "assistant", Content: text})
			text = nil
		}
	}
	var reasoning *respReasoningItem
	flushReasoning := func() {
		if reasoning != nil {
			input = append(input, *reasoning)
			reasoning = nil
		}
	}
	for _, p := range msg.Parts {
		switch p.Type {
		case model.PartThinking:
			if p.ID == "" {
				continue
			}
			flushText()
			if reasoning != nil && reasoning.ID != p.ID {
				flushReasoning()
			}
			if reasoning == nil {
				reasoning = &respReasoningItem{Type: "reasoning", ID: p.ID, Summary: []respSummary{}}
			}
			if p.Text != "" {
				reasoning.Summary = append(reasoning.Summary, respSummary{Type: "summary_text", Text: p.Text})
			}
			if reasoning.EncryptedContent == "" {
				reasoning.EncryptedContent = p.Opaque
			}
		case model.PartText:
			flushReasoning()
			text = append(text, respContent{Type: "output_text", Text: p.Text})
		}
	}
	flushReasoning()
	flushText()
	for _, c := range msg.ToolCalls {
		input = append(input, respFunctionCall{Type: "function_call", CallID: c.ID, Name: c.Name, Arguments: c.Arguments})
	}
	return input
}

// respPart converts a text or image part of an input message; text is
// the type of a text part.
func respPart(p model.Part, text string) (respContent, error) {
	switch p.Type {
	case model.PartText:
		return respContent{Type: text, Text: p.Text}, nil
	case model.PartImage:
		c, err := contentPart(p)
		if err != nil {
			return respContent{}, err
		}
		return respContent{Type: "input_image", ImageURL: c.ImageURL.URL}, nil
	default:
		return respContent{}, fmt.Errorf("unknown part type %q", p.Type)
	}
}

// response converts a response object: its output items (messages,
// function calls and reasoning), its status and its usage.
func (m *ResponsesModel) response(r *respResponse) (*model.Response, error) {
	if r.Status == "failed" || (r.Error != nil && len(r.Output) == 0) {
		if r.Error == nil {
			return nil, streamError("", "", "the response failed")
		}
		return nil, r.Error.statusError()
	}
	msg := model.Message{Role: model.RoleAssistant}
	for _, it := range r.Output {
		switch it.Type {
		case "message":
			for _, c := range it.Content {
				switch {
				case c.Type == "output_text" && c.Text != "":
					msg.Parts = append(msg.Parts, model.TextPart(c.Text))
				case c.Type == "refusal" && c.Refusal != "":
					msg.Parts = append(msg.Parts, model.TextPart(c.Refusal))
				}
			}
		case "function_call":
			id := cmp.Or(it.CallID, it.ID, "call_"+strconv.Itoa(len(msg.ToolCalls)))
			msg.ToolCalls = append(msg.ToolCalls, model.ToolCall{ID: id, Name: it.Name, Arguments: it.Arguments})
		case "reasoning":
			msg.Parts = append(msg.Parts, reasoningParts(it)...)
		}
	}
	var u respUsage
	if r.Usage != nil {
		u = *r.Usage
	}
	usage := model.Usage{
		Requests:     1,
		InputTokens:  u.InputTokens,
		OutputTokens: u.OutputTokens,
		TotalTokens:  cmp.Or(u.TotalTokens, u.InputTokens+u.OutputTokens),
	}
	if d := u.InputTokensDetails; d != nil {
		usage.CachedInputTokens = d.CachedTokens
	}
	if d := u.OutputTokensDetails; d != nil {
		usage.ReasoningTokens = d.ReasoningTokens
	}
	return &model.Response{
		Message:      msg,
		FinishReason: respFinish(r, len(msg.ToolCalls) > 0),
		Usage:        usage,
		Model:        r.Model,
		ID:           r.ID,
	}, nil
}

// reasoningParts converts a reasoning item into thinking parts: one per
// part of its summary (one without text when it has no summary), each with
// the item's id, the first with its encrypted content.
func reasoningParts(it respOutputItem) []model.Part {
	n := max(len(it.Summary), 1)
	parts := make([]model.Part, n)
	for i := range parts {
		parts[i] = model.Part{Type: model.PartThinking, ID: it.ID, Provider: "openai"}
		if i < len(it.Summary) {
			parts[i].Text = it.Summary[i].Text
		}
	}
	parts[0].Opaque = it.EncryptedContent
	return parts
}

// respFinish maps a response's status to a finish reason: an incomplete
// response stopped for its token limit or its content filter.
func respFinish(r *respResponse, toolCalls bool) model.FinishReason {
	switch r.Status {
	case "completed", "":
		if toolCalls {
			return model.FinishToolCalls
		}
		return model.FinishStop
	case "incomplete":
		if r.IncompleteDetails != nil {
			switch r.IncompleteDetails.Reason {
			case "max_output_tokens":
				return model.FinishLength
			case "content_filter":
				return model.FinishContentFilter
			}
		}
		return model.FinishOther
	default:
		return model.FinishOther
	}
}
