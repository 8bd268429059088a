package anthropic

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"github.com/calf-go/calf/model"
)

// invalidArguments is the key under which the text of a tool call's
// arguments that are not a JSON object goes back to the API, whose
// tool_use input must be one.
const invalidArguments = "invalid_arguments"

// request converts req into the body of a Messages request.
func (m *Model) request(req *model.Request) (*wireRequest, error) {
	w := &wireRequest{Model: m.model}
	system, turns, err := messages(model.ForProvider(req.Messages, provider))
	if err != nil {
		return nil, fmt.Errorf("anthropic: %w", err)
	}
	w.System, w.Messages = system, turns
	for _, t := range req.Tools {
		schema, err := inputSchema(t.Parameters)
		if err != nil {
			return nil, fmt.Errorf("anthropic: tool %q: parameters: %w", t.Name, err)
		}
		w.Tools = append(w.Tools, wireTool{Name: t.Name, Description: t.Description, InputSchema: schema})
	}
	// The API takes a tool choice only with tools.
	if len(w.Tools) > 0 {
		w.ToolChoice = toolChoice(req.ToolChoice, req.ParallelToolCalls)
	}
	if o := req.Output; o != nil {
		if t := bytes.TrimLeft(o.Schema, " \t\r\n"); len(t) == 0 || t[0] != '{' {
			return nil, fmt.Errorf("anthropic: output schema: want a JSON object")
		}
		w.OutputConfig = &wireOutputConfig{Format: wireFormat{Type: "json_schema", Schema: o.Schema}}
	}
	w.MaxTokens = m.maxTokens
	if req.MaxTokens > 0 {
		w.MaxTokens = req.MaxTokens
	}
	if m.thinking > 0 {
		w.Thinking = &wireThinking{Type: "enabled", BudgetTokens: m.thinking}
		if w.MaxTokens <= m.thinking {
			w.MaxTokens += m.thinking
		}
	} else {
		w.Temperature = req.Temperature
	}
	if m.caching {
		breakpoints(w)
	}
	return w, nil
}

// breakpoints marks w's prompt-cache breakpoints: the end of the system
// prompt, the last tool, and the last block of the conversation that can
// be one (not a thinking block). The API caches the prefix up to each:
// tools, then system, then messages; a conversation that grows by a turn
// finds its previous prefix in the cache.
func breakpoints(w *wireRequest) {
	cc := &cacheControl{Type: "ephemeral"}
	if n := len(w.System); n > 0 {
		w.System[n-1].CacheControl = cc
	}
	if n := len(w.Tools); n > 0 {
		w.Tools[n-1].CacheControl = cc
	}
	if n := len(w.Messages); n > 0 {
		c := w.Messages[n-1].Content
		for i := len(c) - 1; i >= 0 && !c[i].cache(cc); i-- {
		}
	}
}

// toolChoice returns the tool_choice of a request with tools, or nil for
// the API's default (auto, parallel calls allowed).
func toolChoice(c model.ToolChoice, parallel *bool) *wireToolChoice {
	serial := parallel != nil && !*parallel
	switch c {
	case "", model.ToolChoiceAuto:
		if !serial {
			return nil
		}
		return &wireToolChoice{Type: "auto", DisableParallelToolUse: true}
	case model.ToolChoiceNone:
		return &wireToolChoice{Type: "none"}
	case model.ToolChoiceRequired:
		return &wireToolChoice{Type: "any", DisableParallelToolUse: serial}
	default:
		return &wireToolChoice{Type: "tool", Name: string(c), DisableParallelToolUse: serial}
	}
}

// inputSchema checks a tool's JSON Schema, which must be a JSON object. A
// missing schema stands for an object without properties. Encoding the
// request checks that the schema is valid JSON.
func inputSchema(schema json.RawMessage) (json.RawMessage, error) {
	t := bytes.TrimLeft(schema, " \t\r\n")
	if len(t) == 0 {
		return json.RawMessage(`{"type":"object","properties":{}}`), nil
	}
	if t[0] != '{' {
		return nil, fmt.Errorf("schema is not a JSON object")
	}
	return schema, nil
}

// messages converts a conversation into the system prompt and the turns
// of a request. System messages become the system prompt; user and tool
// messages user turns (a tool message as a tool_result block); assistant
// messages assistant turns. Consecutive messages of one role go into one
// turn, so that the results of one response's tool calls go back together
// in one user turn, as the API wants them.
func messages(msgs []model.Message) ([]*textBlock, []wireMessage, error) {
	var (
		system []*textBlock
		turns  []wireMessage
	)
	add := func(role string, blocks []block) {
		if len(blocks) == 0 {
			return
		}
		if n := len(turns); n > 0 && turns[n-1].Role == role {
			turns[n-1].Content = append(turns[n-1].Content, blocks...)
			return
		}
		turns = append(turns, wireMessage{Role: role, Content: blocks})
	}
	for i, msg := range msgs {
		switch msg.Role {
		case model.RoleSystem:
			for _, p := range msg.Parts {
				switch p.Type {
				case model.PartText:
					if p.Text != "" {
						system = append(system, &textBlock{Type: "text", Text: p.Text})
					}
				case model.PartThinking:
				default:
					return nil, nil, fmt.Errorf("message %d: a system message takes only text, not %s", i, p.Type)
				}
			}
		case model.RoleUser:
			blocks, err := content(msg.Parts)
			if err != nil {
				return nil, nil, fmt.Errorf("message %d: %w", i, err)
			}
			add("user", blocks)
		case model.RoleTool:
			b, err := toolResult(msg)
			if err != nil {
				return nil, nil, fmt.Errorf("message %d: %w", i, err)
			}
			add("user", []block{b})
		case model.RoleAssistant:
			blocks, err := assistant(msg)
			if err != nil {
				return nil, nil, fmt.Errorf("message %d: %w", i, err)
			}
			add("assistant", blocks)
		default:
			return nil, nil, fmt.Errorf("message %d: unknown role %q", i, msg.Role)
		}
	}
	return system, turns, nil
}

// content converts the text and images of a user or tool message. Empty
// text, which the API refuses, and thinking, which only an assistant turn
// holds, are left out.
func content(parts []model.Part) ([]block, error) {
	var blocks []block
	for _, p := range parts {
		switch p.Type {
		case model.PartText:
			if p.Text != "" {
				blocks = append(blocks, &textBlock{Type: "text", Text: p.Text})
			}
		case model.PartImage:
			b, err := image(p)
			if err != nil {
				return nil, err
			}
			blocks = append(blocks, b)
		case model.PartThinking:
		default:
			return nil, fmt.Errorf("unknown part type %q", p.Type)
		}
	}
	return blocks, nil
}

// toolResult converts a tool message: its text as a string, or, when it
// has images, its text and images as blocks.
func toolResult(msg model.Message) (block, error) {
	b := &toolResultBlock{Type: "tool_result", ToolUseID: msg.ToolCallID, IsError: msg.IsError}
	blocks, err := content(msg.Parts)
	if err != nil {
		return nil, err
	}
	images := false
	for _, c := range blocks {
		_, ok := c.(*imageBlock)
		images = images || ok
	}
	switch {
	case images:
		b.Content = blocks
	case len(blocks) > 0:
		b.Content = msg.Text()
	}
	return b, nil
}

// assistant converts an assistant message: its thinking blocks first, as
// the API wants them, then its text and its tool calls. A thinking part
// with neither a signature nor redacted content cannot be sent back (the
// API checks the signature) and is left out.
func assistant(msg model.Message) ([]block, error) {
	var thinking, rest []block
	for _, p := range msg.Parts {
		switch p.Type {
		case model.PartThinking:
			switch {
			case p.Opaque != "":
				thinking = append(thinking, &redactedThinkingBlock{Type: "redacted_thinking", Data: p.Opaque})
			case p.Signature != "":
				thinking = append(thinking, &thinkingBlock{Type: "thinking", Thinking: p.Text, Signature: p.Signature})
			}
		case model.PartText:
			if p.Text != "" {
				rest = append(rest, &textBlock{Type: "text", Text: p.Text})
			}
		case model.PartImage:
			b, err := image(p)
			if err != nil {
				return nil, err
			}
			rest = append(rest, b)
		default:
			return nil, fmt.Errorf("unknown part type %q", p.Type)
		}
	}
	for _, c := range msg.ToolCalls {
		rest = append(rest, &toolUseBlock{Type: "tool_use", ID: c.ID, Name: c.Name, Input: arguments(c.Arguments)})
	}
	return append(thinking, rest...), nil
}

// arguments returns a tool call's arguments as the tool_use input the API
// takes, a JSON object: the arguments themselves when they are one; {} for
// none; else, for arguments that are malformed or not an object (which a
// model of another provider may have sent), an object that holds their
// text under "invalid_arguments", so that the model sees what it sent.
func arguments(s string) json.RawMessage {
	t := strings.TrimSpace(s)
	switch {
	case t == "":
		return json.RawMessage(`{}`)
	case t[0] == '{' && json.Valid([]byte(t)):
		return json.RawMessage(t)
	}
	b, _ := json.Marshal(map[string]string{invalidArguments: s})
	return b
}

// image converts an image part: inline data (Data, or a data URL) as a
// base64 source, an http(s) URL as a url source.
func image(p model.Part) (*imageBlock, error) {
	b := &imageBlock{Type: "image"}
	switch {
	case len(p.Data) > 0:
		b.Source = imageSource{Type: "base64", MediaType: mediaType(p.MIMEType, p.Data), Data: base64.StdEncoding.EncodeToString(p.Data)}
	case strings.HasPrefix(p.URL, "data:"):
		src, err := dataURL(p.URL)
		if err != nil {
			return nil, err
		}
		b.Source = src
	case strings.HasPrefix(p.URL, "http://") || strings.HasPrefix(p.URL, "https://"):
		b.Source = imageSource{Type: "url", URL: p.URL}
	case p.URL == "":
		return nil, fmt.Errorf("image part has neither data nor URL")
	default:
		return nil, fmt.Errorf("image URL %q: want http(s) or data", truncate(p.URL))
	}
	return b, nil
}

// mediaType returns the media type of image data: mimeType without
// parameters, or what the data looks like.
func mediaType(mimeType string, data []byte) string {
	if mimeType == "" {
		mimeType = http.DetectContentType(data)
	}
	if t, _, err := mime.ParseMediaType(mimeType); err == nil {
		return t
	}
	return mimeType
}

// dataURL converts a data URL (data:[type][;base64],data) into a base64
// source.
func dataURL(u string) (imageSource, error) {
	meta, data, ok := strings.Cut(strings.TrimPrefix(u, "data:"), ",")
	if !ok {
		return imageSource{}, fmt.Errorf("malformed data URL %q", truncate(u))
	}
	typ, isBase64 := strings.CutSuffix(meta, ";base64")
	var raw []byte
	if isBase64 {
		b, err := base64.StdEncoding.DecodeString(data)
		if err != nil {
			return imageSource{}, fmt.Errorf("data URL: %w", err)
		}
		raw = b
	} else {
		s, err := url.PathUnescape(data)
		if err != nil {
			return imageSource{}, fmt.Errorf("data URL: %w", err)
		}
		raw = []byte(s)
	}
	return imageSource{Type: "base64", MediaType: mediaType(typ, raw), Data: base64.StdEncoding.EncodeToString(raw)}, nil
}

func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// response converts a message of the API.
func response(w *wireResponse) (*model.Response, error) {
	if w.Type != "" && w.Type != "message" {
		return nil, fmt.Errorf("anthropic: the answer is a %q, not a message", w.Type)
	}
	msg := model.Message{Role: model.RoleAssistant}
	for _, b := range w.Content {
		switch b.Type {
		case "text":
			if b.Text != "" {
				msg.Parts = append(msg.Parts, model.TextPart(b.Text))
			}
		case "thinking":
			msg.Parts = append(msg.Parts, model.Part{Type: model.PartThinking, Text: b.Thinking, Signature: b.Signature, Provider: provider})
		case "redacted_thinking":
			msg.Parts = append(msg.Parts, model.Part{Type: model.PartThinking, Opaque: b.Data, Provider: provider})
		case "tool_use":
			msg.ToolCalls = append(msg.ToolCalls, model.ToolCall{ID: b.ID, Name: b.Name, Arguments: cmp.Or(string(b.Input), "{}")})
		}
	}
	u := w.Usage
	in := u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens
	return &model.Response{
		Message:      msg,
		FinishReason: finishReason(w.StopReason),
		Usage: model.Usage{
			Requests:              1,
			InputTokens:           in,
			CachedInputTokens:     u.CacheReadInputTokens,
			CacheWriteInputTokens: u.CacheCreationInputTokens,
			OutputTokens:          u.OutputTokens,
			TotalTokens:           in + u.OutputTokens,
		},
		Model: w.Model,
		ID:    w.ID,
	}, nil
}

// finishReason maps the API's stop reason.
func finishReason(r string) model.FinishReason {
	switch r {
	case "end_turn", "stop_sequence":
		return model.FinishStop
	case "tool_use":
		return model.FinishToolCalls
	case "max_tokens", "model_context_window_exceeded":
		return model.FinishLength
	case "refusal":
		return model.FinishContentFilter
	default: // pause_turn, and reasons the API may add
		return model.FinishOther
	}
}
