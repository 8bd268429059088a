package gemini

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/calf-go/calf/model"
)

// Errors of a response. A response the API's filters stopped is a
// *[BlockedError], which matches ErrBlocked and the sentinel of its
// reason.
var (
	// ErrBlocked matches every *BlockedError: a prompt or a response
	// blocked by the API's filters.
	ErrBlocked = errors.New("gemini: blocked")
	// ErrSafety matches a block for safety (finish reason or block reason
	// SAFETY, or IMAGE_SAFETY).
	ErrSafety = errors.New("gemini: blocked for safety")
	// ErrRecitation matches a response stopped for reciting training data
	// (RECITATION, IMAGE_RECITATION).
	ErrRecitation = errors.New("gemini: blocked for recitation")
	// ErrBlocklist matches a block for terms of the terminology blocklist
	// (BLOCKLIST).
	ErrBlocklist = errors.New("gemini: blocked by the blocklist")
	// ErrProhibitedContent matches a block for prohibited content
	// (PROHIBITED_CONTENT, IMAGE_PROHIBITED_CONTENT).
	ErrProhibitedContent = errors.New("gemini: blocked for prohibited content")
	// ErrSPII matches a response stopped for sensitive personally
	// identifiable information (SPII).
	ErrSPII = errors.New("gemini: blocked for sensitive personal information")
	// ErrEmptyResponse is returned for a response without a candidate, or
	// one that stopped for another reason (a malformed function call, for
	// instance) with nothing in it.
	ErrEmptyResponse = errors.New("gemini: empty response")
)

// BlockedError is a prompt or a response the API's filters blocked. It
// matches [ErrBlocked] and, by Reason, [ErrSafety], [ErrRecitation],
// [ErrBlocklist], [ErrProhibitedContent] or [ErrSPII].
type BlockedError struct {
	// Model is the model asked.
	Model string
	// Prompt reports a blocked prompt (promptFeedback.blockReason): the
	// API generated nothing. Otherwise the response was stopped
	// (candidates[0].finishReason).
	Prompt bool
	// Reason is the API's reason: SAFETY, RECITATION, BLOCKLIST,
	// PROHIBITED_CONTENT, SPII, LANGUAGE, IMAGE_SAFETY, OTHER...
	Reason string
	// Message is what the API said of it (finishMessage or
	// blockReasonMessage), if anything.
	Message string
	// Ratings are the safety ratings of the prompt or the response.
	Ratings []SafetyRating
}

// SafetyRating is the API's rating of a prompt or a response for one
// category of harm.
type SafetyRating struct {
	Category    string // such as HARM_CATEGORY_DANGEROUS_CONTENT
	Probability string // NEGLIGIBLE, LOW, MEDIUM or HIGH
	Blocked     bool   // this rating blocked the content
}

// Error names the model, what was blocked and why, with the ratings that
// blocked it and the API's message.
func (e *BlockedError) Error() string {
	what := "response"
	if e.Prompt {
		what = "prompt"
	}
	s := fmt.Sprintf("gemini: %s: %s blocked: %s", e.Model, what, e.Reason)
	var flagged []string
	for _, r := range e.Ratings {
		if r.Blocked || r.Probability == "MEDIUM" || r.Probability == "HIGH" {
			flagged = append(flagged, r.Category+" "+r.Probability)
		}
	}
	if len(flagged) > 0 {
		s += " (" + strings.Join(flagged, ", ") + ")"
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// Is reports whether target is ErrBlocked or the sentinel of e's reason.
func (e *BlockedError) Is(target error) bool {
	switch target {
	case ErrBlocked:
		return true
	case ErrSafety:
		return e.Reason == "SAFETY" || e.Reason == "IMAGE_SAFETY"
	case ErrRecitation:
		return e.Reason == "RECITATION" || e.Reason == "IMAGE_RECITATION"
	case ErrBlocklist:
		return e.Reason == "BLOCKLIST"
	case ErrProhibitedContent:
		return e.Reason == "PROHIBITED_CONTENT" || e.Reason == "IMAGE_PROHIBITED_CONTENT"
	case ErrSPII:
		return e.Reason == "SPII"
	}
	return false
}

// blockingFinish are the finish reasons of a response the filters stopped.
var blockingFinish = map[string]bool{
	"SAFETY": true, "RECITATION": true, "BLOCKLIST": true, "PROHIBITED_CONTENT": true, "SPII": true,
	"LANGUAGE": true, "IMAGE_SAFETY": true, "IMAGE_PROHIBITED_CONTENT": true, "IMAGE_RECITATION": true,
}

func ratings(ws []wireSafetyRating) []SafetyRating {
	if len(ws) == 0 {
		return nil
	}
	out := make([]SafetyRating, len(ws))
	for i, r := range ws {
		out[i] = SafetyRating{
			Category:    r.Category.name(harmCategories),
			Probability: r.Probability.name(harmProbabilities),
			Blocked:     r.Blocked,
		}
	}
	return out
}

// accumulator builds a response from the chunks of a stream, or from the
// one answer of generateContent: the first candidate's parts, its finish
// reason, the last usage, the model version and the response id.
//
// Text (and thought) parts of successive chunks are joined into one part,
// up to a part that carries a thought signature: a signature stays on the
// part it came with (one that came with an empty text part joins the text
// before it). The parts of one chunk are never joined with each other.
type accumulator struct {
	model   string
	unfence bool // strip Markdown code fences around a JSON answer
	msg     model.Message
	open    int // the part the next chunk's first part may extend, or -1
	id      string
	version string
	usage   *wireUsage
	seen    bool // a candidate came
	finish  string
	message string
	ratings []wireSafetyRating
	blocked *wirePromptFeedback
}

func (m *Model) newAccumulator(unfence bool) *accumulator {
	return &accumulator{model: m.name, unfence: unfence, open: -1, msg: model.Message{Role: model.RoleAssistant}}
}

// add folds the chunk w into the response, calling emit with the deltas
// it brings, until emit returns false; add returns false then.
func (a *accumulator) add(w *wireResponse, emit func(*model.Delta) bool) bool {
	if emit == nil {
		emit = func(*model.Delta) bool { return true }
	}
	if a.id == "" {
		a.id = w.ResponseID
	}
	if w.ModelVersion != "" {
		a.version = w.ModelVersion
	}
	if w.UsageMetadata != nil {
		a.usage = w.UsageMetadata
	}
	if f := w.PromptFeedback; f != nil && f.BlockReason != "" && f.BlockReason.name(blockReasons) != "BLOCK_REASON_UNSPECIFIED" {
		a.blocked = f
	}
	var c *wireCandidate
	for i := range w.Candidates {
		if w.Candidates[i].Index == 0 {
			c = &w.Candidates[i]
			break
		}
	}
	if c == nil {
		return true
	}
	a.seen = true
	if c.FinishReason != "" {
		a.finish, a.message = c.FinishReason.name(finishReasons), c.FinishMessage
	}
	if len(c.SafetyRatings) > 0 {
		a.ratings = c.SafetyRatings
	}
	if c.Content == nil {
		return true
	}
	for j, p := range c.Content.Parts {
		switch {
		case p.FunctionCall != nil:
			tc := a.call(p)
			a.open = -1
			d := &model.ToolCallDelta{Index: len(a.msg.ToolCalls) - 1, ID: tc.ID, Name: tc.Name, Arguments: tc.Arguments}
			if !emit(&model.Delta{ToolCall: d}) {
				return false
			}
		case p.Thought || p.Text != "" || (p.ThoughtSignature != "" && p.InlineData == nil && p.FileData == nil && p.FunctionResponse == nil):
			typ := model.PartText
			if p.Thought {
				typ = model.PartThinking
			}
			if j == 0 && a.open >= 0 && a.msg.Parts[a.open].Type == typ && a.msg.Parts[a.open].Signature == "" {
				q := &a.msg.Parts[a.open]
				q.Text += p.Text
				if p.ThoughtSignature != "" {
					q.Signature, q.Provider = p.ThoughtSignature, provider
				}
			} else {
				part := model.Part{Type: typ, Text: p.Text, Signature: p.ThoughtSignature}
				if typ == model.PartThinking || part.Signature != "" {
					part.Provider = provider
				}
				a.msg.Parts = append(a.msg.Parts, part)
				a.open = len(a.msg.Parts) - 1
			}
			if p.Text == "" {
				continue
			}
			d := &model.Delta{Text: p.Text}
			if p.Thought {
				d = &model.Delta{Thinking: p.Text}
			}
			if !emit(d) {
				return false
			}
		case p.InlineData != nil && strings.HasPrefix(p.InlineData.MIMEType, "image/"):
			data, err := decodeBase64(p.InlineData.Data)
			if err != nil {
				continue
			}
			part := model.ImagePart(p.InlineData.MIMEType, data)
			if p.ThoughtSignature != "" {
				part.Signature, part.Provider = p.ThoughtSignature, provider
			}
			a.msg.Parts = append(a.msg.Parts, part)
			a.open = -1
		default:
			// Parts of built-in tools (code execution) and other media are
			// not part of the neutral model.
		}
	}
	return true
}

// call adds the function call of p as a tool call: its id is the model's,
// or one made from the response id, the call's position, name and
// arguments, the same every time the same response is read.
func (a *accumulator) call(p wirePart) model.ToolCall {
	fc := p.FunctionCall
	args := compactJSON(fc.Args)
	if len(args) == 0 || string(args) == "null" {
		args = []byte("{}")
	}
	id := fc.ID
	if id == "" {
		h := sha256.New()
		fmt.Fprintf(h, "%s\x00%d\x00%s\x00", a.id, len(a.msg.ToolCalls), fc.Name)
		h.Write(args)
		id = "call_" + hex.EncodeToString(h.Sum(nil)[:8])
	}
	tc := model.ToolCall{ID: id, Name: fc.Name, Arguments: string(args), Signature: p.ThoughtSignature, Provider: provider}
	a.msg.ToolCalls = append(a.msg.ToolCalls, tc)
	return tc
}

// response returns the response built, or the error it amounts to. A
// stream must have ended with a finish reason.
func (a *accumulator) response(stream bool) (*model.Response, error) {
	if f := a.blocked; f != nil {
		return nil, &BlockedError{Model: a.model, Prompt: true, Reason: f.BlockReason.name(blockReasons),
			Message: f.BlockReasonMessage, Ratings: ratings(f.SafetyRatings)}
	}
	if !a.seen {
		if stream {
			return nil, fmt.Errorf("gemini: %s: %w: the stream ended before its first chunk", a.model, io.ErrUnexpectedEOF)
		}
		return nil, fmt.Errorf("%w: gemini: %s: the response has no candidate", ErrEmptyResponse, a.model)
	}
	if stream && a.finish == "" {
		return nil, fmt.Errorf("gemini: %s: %w: the stream ended before its last chunk", a.model, io.ErrUnexpectedEOF)
	}
	if blockingFinish[a.finish] {
		return nil, &BlockedError{Model: a.model, Reason: a.finish, Message: a.message, Ratings: ratings(a.ratings)}
	}
	r := &model.Response{Message: a.msg, ID: a.id, Model: a.version, Usage: a.usageOf()}
	if r.Model == "" {
		r.Model = a.model
	}
	switch a.finish {
	case "STOP", "", "FINISH_REASON_UNSPECIFIED":
		r.FinishReason = model.FinishStop
		if len(r.Message.ToolCalls) > 0 {
			r.FinishReason = model.FinishToolCalls
		}
	case "MAX_TOKENS":
		r.FinishReason = model.FinishLength
	default:
		// MALFORMED_FUNCTION_CALL, UNEXPECTED_TOOL_CALL,
		// TOO_MANY_TOOL_CALLS, OTHER...
		if len(r.Message.Parts) == 0 && len(r.Message.ToolCalls) == 0 {
			msg := ""
			if a.message != "" {
				msg = ": " + a.message
			}
			return nil, fmt.Errorf("%w: gemini: %s: the model stopped (%s) with nothing%s", ErrEmptyResponse, a.model, a.finish, msg)
		}
		r.FinishReason = model.FinishOther
	}
	if a.unfence {
		unfence(&r.Message)
	}
	return r, nil
}

func (a *accumulator) usageOf() model.Usage {
	u := model.Usage{Requests: 1}
	if w := a.usage; w != nil {
		u.InputTokens = w.PromptTokenCount
		u.CachedInputTokens = w.CachedContentTokenCount
		u.OutputTokens = w.CandidatesTokenCount + w.ThoughtsTokenCount
		u.ReasoningTokens = w.ThoughtsTokenCount
		u.TotalTokens = w.TotalTokenCount
	}
	return u
}

// fence matches a JSON answer inside a Markdown code fence.
var fence = regexp.MustCompile("(?s)^\\s*```(?:json|JSON)?[ \t]*\n?(.*?)\n?```\\s*$")

// unfence strips a Markdown code fence around the text of m, which a
// model asked for JSON by instruction may add.
func unfence(m *model.Message) {
	idx := -1
	for i, p := range m.Parts {
		if p.Type == model.PartText {
			if idx >= 0 {
				return // several text parts: left as they are
			}
			idx = i
		}
	}
	if idx < 0 {
		return
	}
	if sub := fence.FindStringSubmatch(m.Parts[idx].Text); sub != nil {
		m.Parts[idx].Text = sub[1]
	}
}

// decodeBase64 decodes the API's bytes: standard base64, or URL-safe, with
// or without padding.
func decodeBase64(s string) ([]byte, error) {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			return b, nil
		}
	}
	return nil, errors.New("gemini: invalid base64 data")
}
