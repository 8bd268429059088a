package gemini

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/calf-go/calf/model"
)

// request converts req into the API's request. inPrompt puts the output
// schema in the system instruction instead of the generation config.
func (m *Model) request(req *model.Request, inPrompt bool) (*wireRequest, error) {
	msgs := model.ForProvider(req.Messages, provider)
	w := &wireRequest{Contents: make([]wireContent, 0, len(msgs))}
	var system []wirePart
	// calls remembers, by id, the name of each call and whether its id is
	// the model's (sent back on the call and its response).
	calls := map[string]callInfo{}
	for i := 0; i < len(msgs); i++ {
		msg := msgs[i]
		switch msg.Role {
		case model.RoleSystem:
			for _, p := range msg.Parts {
				switch p.Type {
				case model.PartText:
					if p.Text != "" {
						system = append(system, wirePart{Text: p.Text})
					}
				case model.PartThinking:
				default:
					return nil, fmt.Errorf("gemini: message %d: a system message takes text only, not %s parts", i, p.Type)
				}
			}
		case model.RoleUser:
			parts, err := userParts(msg.Parts, i)
			if err != nil {
				return nil, err
			}
			if len(parts) > 0 {
				w.Contents = append(w.Contents, wireContent{Role: "user", Parts: parts})
			}
		case model.RoleAssistant:
			parts, err := modelParts(msg, i, calls)
			if err != nil {
				return nil, err
			}
			if len(parts) > 0 {
				w.Contents = append(w.Contents, wireContent{Role: "model", Parts: parts})
			}
		case model.RoleTool:
			// Consecutive tool results answer one turn's calls: they go
			// back together, in one user content, their images after.
			var parts, images []wirePart
			for ; i < len(msgs) && msgs[i].Role == model.RoleTool; i++ {
				fr, imgs, err := functionResponse(msgs[i], i, calls)
				if err != nil {
					return nil, err
				}
				parts = append(parts, fr)
				images = append(images, imgs...)
			}
			i--
			w.Contents = append(w.Contents, wireContent{Role: "user", Parts: append(parts, images...)})
		default:
			return nil, fmt.Errorf("gemini: message %d: unknown role %q", i, msg.Role)
		}
	}
	if len(w.Contents) == 0 {
		return nil, fmt.Errorf("gemini: %s: the request has no user or assistant content", m.name)
	}
	if validatesSignatures(m.name) {
		signCurrentTurn(w.Contents)
	}
	if err := m.tools(w, req); err != nil {
		return nil, err
	}
	gc := &wireGenerationConfig{Temperature: req.Temperature}
	if req.MaxTokens > 0 {
		gc.MaxOutputTokens = req.MaxTokens
	}
	switch {
	case m.thinking > 0:
		gc.ThinkingConfig = &wireThinkingConfig{ThinkingBudget: &m.thinking, IncludeThoughts: true}
	case m.thinking == ThinkingDynamic:
		budget := -1
		gc.ThinkingConfig = &wireThinkingConfig{ThinkingBudget: &budget, IncludeThoughts: true}
	case m.thinking == ThinkingOff:
		budget := 0
		gc.ThinkingConfig = &wireThinkingConfig{ThinkingBudget: &budget}
	}
	if o := req.Output; o != nil {
		if inPrompt {
			system = append(system, wirePart{Text: outputInstruction(o.Schema)})
		} else {
			gc.ResponseMIMEType = "application/json"
			s, err := translateSchema(o.Schema, true)
			if err != nil {
				return nil, fmt.Errorf("gemini: output schema %q: %w", o.Name, err)
			}
			gc.ResponseSchema = s
		}
	}
	if gc.Temperature != nil || gc.MaxOutputTokens > 0 || gc.ThinkingConfig != nil || gc.ResponseMIMEType != "" {
		w.GenerationConfig = gc
	}
	if len(system) > 0 {
		w.SystemInstruction = &wireContent{Parts: system}
	}
	return w, nil
}

// SkipSignature is the thought signature sent on a function call that has
// none of its own, in the current turn of a model that validates
// signatures (Gemini 3 and later): a call made by another provider's model,
// one whose signature was lost, or one made up by the program. Google
// documents it, and "context_engineering_is_the_way_to_go", as the dummy
// signatures that the API accepts in place of a missing one; this one is
// also Vertex AI's.
const SkipSignature = "skip_thought_signature_validator"

// validatesSignatures reports whether the model named name may refuse a
// function call without its thought signature: a Gemini model of version
// 3 or later, or an alias such as gemini-flash-latest; not Gemini 1 and 2,
// which do not check signatures, nor other models the API serves (Gemma).
func validatesSignatures(name string) bool {
	return strings.HasPrefix(name, "gemini-") && !strings.HasPrefix(name, "gemini-1") && !strings.HasPrefix(name, "gemini-2")
}

// signCurrentTurn gives SkipSignature to the first function call of each
// model step of the current turn (from the last user content that is not
// only function responses) that has no signature, which is where Gemini 3
// requires one; of parallel calls the model signs the first only.
// Signatures that the model gave are never replaced, and earlier turns,
// which the API does not check, are left as they are.
func signCurrentTurn(contents []wireContent) {
	start := 0
	for i := len(contents) - 1; i >= 0; i-- {
		if contents[i].Role == "user" && !onlyFunctionResponses(contents[i].Parts) {
			start = i + 1
			break
		}
	}
	for i := start; i < len(contents); i++ {
		if contents[i].Role != "model" {
			continue
		}
		parts := contents[i].Parts
		for j := range parts {
			if parts[j].FunctionCall != nil {
				if parts[j].ThoughtSignature == "" {
					parts[j].ThoughtSignature = SkipSignature
				}
				break
			}
		}
	}
}

// onlyFunctionResponses reports whether parts are function responses
// (with the images of a tool's result, which follow them).
func onlyFunctionResponses(parts []wirePart) bool {
	responses := false
	for _, p := range parts {
		switch {
		case p.FunctionResponse != nil:
			responses = true
		case p.InlineData != nil || p.FileData != nil:
		default:
			return false
		}
	}
	return responses
}

// outputInstruction asks for JSON following schema, for a model that
// cannot take the schema with function declarations.
func outputInstruction(schema json.RawMessage) string {
	var b bytes.Buffer
	b.WriteString("When you give your final answer (not a function call), answer with a single JSON value and nothing else, without Markdown code fences")
	if c := compactJSON(schema); len(c) > 0 {
		b.WriteString(", following this JSON Schema:\n")
		b.Write(c)
	} else {
		b.WriteString(".")
	}
	return b.String()
}

// tools sets the function declarations and the tool config of w.
func (m *Model) tools(w *wireRequest, req *model.Request) error {
	if len(req.Tools) == 0 {
		return nil
	}
	decls := make([]wireFunctionDeclaration, len(req.Tools))
	for i, t := range req.Tools {
		params, err := translateSchema(t.Parameters, false)
		if err != nil {
			return fmt.Errorf("gemini: tool %q: parameters: %w", t.Name, err)
		}
		decls[i] = wireFunctionDeclaration{Name: t.Name, Description: t.Description, Parameters: params}
	}
	w.Tools = []wireTool{{FunctionDeclarations: decls}}
	var fc wireFunctionCallingConfig
	switch req.ToolChoice {
	case "":
		return nil // AUTO, the API's default
	case model.ToolChoiceAuto:
		fc.Mode = "AUTO"
	case model.ToolChoiceNone:
		fc.Mode = "NONE"
	case model.ToolChoiceRequired:
		fc.Mode = "ANY"
	default:
		name := string(req.ToolChoice)
		if !slices.ContainsFunc(req.Tools, func(t model.ToolDefinition) bool { return t.Name == name }) {
			return fmt.Errorf("gemini: tool choice %q names no tool of the request", name)
		}
		fc.Mode, fc.AllowedFunctionNames = "ANY", []string{name}
	}
	w.ToolConfig = &wireToolConfig{FunctionCallingConfig: fc}
	return nil
}

// callInfo is what the encoding of a tool result needs of its call.
type callInfo struct {
	name   string
	sendID bool
}

// userParts converts the parts of a user message.
func userParts(parts []model.Part, i int) ([]wirePart, error) {
	out := make([]wirePart, 0, len(parts))
	for _, p := range parts {
		switch p.Type {
		case model.PartText:
			if p.Text != "" {
				out = append(out, wirePart{Text: p.Text})
			}
		case model.PartImage:
			wp, err := imagePart(p)
			if err != nil {
				return nil, fmt.Errorf("gemini: message %d: %w", i, err)
			}
			out = append(out, wp)
		case model.PartThinking:
			// Only the model thinks.
		default:
			return nil, fmt.Errorf("gemini: message %d: unknown part type %q", i, p.Type)
		}
	}
	return out, nil
}

// modelParts converts an assistant message: its parts (thoughts and text
// with their signatures), then its tool calls as function calls. The
// signature of each part goes back on the same part, as the API requires.
func modelParts(msg model.Message, i int, calls map[string]callInfo) ([]wirePart, error) {
	out := make([]wirePart, 0, len(msg.Parts)+len(msg.ToolCalls))
	for _, p := range msg.Parts {
		switch p.Type {
		case model.PartThinking:
			if p.Text != "" || p.Signature != "" {
				out = append(out, wirePart{Text: p.Text, Thought: true, ThoughtSignature: p.Signature})
			}
		case model.PartText:
			if p.Text != "" || p.Signature != "" {
				out = append(out, wirePart{Text: p.Text, ThoughtSignature: p.Signature})
			}
		case model.PartImage:
			wp, err := imagePart(p)
			if err != nil {
				return nil, fmt.Errorf("gemini: message %d: %w", i, err)
			}
			wp.ThoughtSignature = p.Signature
			out = append(out, wp)
		default:
			return nil, fmt.Errorf("gemini: message %d: unknown part type %q", i, p.Type)
		}
	}
	for _, c := range msg.ToolCalls {
		// A call's id goes back, with its response's, whoever gave it (the
		// model, a conversation built by hand, another provider): the
		// API pairs calls and responses by it. Only the ids this package
		// made up for calls the model gave without one do not.
		send := c.ID != "" && !generatedID.MatchString(c.ID)
		calls[c.ID] = callInfo{name: c.Name, sendID: send}
		fc := &wireFunctionCall{Name: c.Name, Args: argsObject(c.Arguments)}
		if send {
			fc.ID = c.ID
		}
		out = append(out, wirePart{FunctionCall: fc, ThoughtSignature: c.Signature})
	}
	return out, nil
}

// argsObject returns the arguments of a call as the JSON object the API
// takes: the arguments themselves when they are one, {} when there are
// none, and {"arguments": text} for anything else (a malformed call of
// another provider's model, kept so that the conversation still reads).
func argsObject(args string) json.RawMessage {
	t := strings.TrimSpace(args)
	if t == "" {
		return json.RawMessage("{}")
	}
	if strings.HasPrefix(t, "{") && json.Valid([]byte(t)) {
		return compactJSON(json.RawMessage(t))
	}
	b, _ := json.Marshal(map[string]string{"arguments": args})
	return b
}

// functionResponse converts a tool result into a functionResponse part,
// and its images into parts that follow the responses.
//
// The response object is the result itself when its text is a JSON
// object, else {"result": value} (the JSON value, or the text); a result
// that reports an error is {"error": value}, the key the API documents for
// a failed call.
func functionResponse(msg model.Message, i int, calls map[string]callInfo) (wirePart, []wirePart, error) {
	call := calls[msg.ToolCallID]
	name := msg.ToolName
	if name == "" {
		name = call.name
	}
	if name == "" {
		return wirePart{}, nil, fmt.Errorf("gemini: message %d: tool result for call %q has no tool name, and no earlier call has that id", i, msg.ToolCallID)
	}
	var text strings.Builder
	var images []wirePart
	for _, p := range msg.Parts {
		switch p.Type {
		case model.PartText:
			text.WriteString(p.Text)
		case model.PartImage:
			wp, err := imagePart(p)
			if err != nil {
				return wirePart{}, nil, fmt.Errorf("gemini: message %d: %w", i, err)
			}
			images = append(images, wp)
		}
	}
	fr := &wireFunctionResponse{Name: name, Response: responseObject(text.String(), msg.IsError)}
	if call.sendID {
		fr.ID = msg.ToolCallID
	}
	return wirePart{FunctionResponse: fr}, images, nil
}

// responseObject returns the response object of a tool result (see
// functionResponse).
func responseObject(text string, isError bool) json.RawMessage {
	key := "result"
	if isError {
		key = "error"
	}
	var value json.RawMessage
	if t := strings.TrimSpace(text); t != "" && json.Valid([]byte(t)) {
		value = compactJSON(json.RawMessage(t))
		if !isError && value[0] == '{' {
			return value
		}
	} else {
		value, _ = json.Marshal(text)
	}
	b, _ := json.Marshal(map[string]json.RawMessage{key: value})
	return b
}

// imagePart converts an image: inline data (or a data URL) as inlineData,
// any other URL (an https URL, a gs:// URI, a file of the Files API) as
// fileData.
func imagePart(p model.Part) (wirePart, error) {
	if len(p.Data) > 0 {
		mt := p.MIMEType
		if mt == "" {
			mt = http.DetectContentType(p.Data)
		}
		return wirePart{InlineData: &wireBlob{MIMEType: mt, Data: base64.StdEncoding.EncodeToString(p.Data)}}, nil
	}
	if p.URL == "" {
		return wirePart{}, fmt.Errorf("an image part without data or URL")
	}
	if rest, ok := strings.CutPrefix(p.URL, "data:"); ok {
		meta, data, ok := strings.Cut(rest, ",")
		mt, isBase64 := strings.CutSuffix(meta, ";base64")
		if !ok || mt == "" {
			return wirePart{}, fmt.Errorf("malformed data URL in an image part")
		}
		if !isBase64 {
			data = base64.StdEncoding.EncodeToString([]byte(data))
		}
		return wirePart{InlineData: &wireBlob{MIMEType: mt, Data: data}}, nil
	}
	mt := p.MIMEType
	if mt == "" {
		mt = mime.TypeByExtension(path.Ext(strings.SplitN(p.URL, "?", 2)[0]))
		mt, _, _ = strings.Cut(mt, ";")
	}
	return wirePart{FileData: &wireFileData{MIMEType: mt, FileURI: p.URL}}, nil
}

// compactJSON returns the JSON text raw without insignificant space, or
// raw itself when it is not valid JSON.
func compactJSON(raw json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return raw
	}
	return b.Bytes()
}

// generatedID matches the ids this package gives calls the model gave
// none.
var generatedID = regexp.MustCompile(`^call_[0-9a-f]{16}$`)
