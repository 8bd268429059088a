package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/runner"
)

// responsesRequest is the part of a Responses API request that the server
// reads.
type responsesRequest struct {
	Model              string          `json:"model"`
	Input              json.RawMessage `json:"input"`
	Instructions       string          `json:"instructions"`
	Stream             bool            `json:"stream"`
	Tools              []any           `json:"tools"`
	PreviousResponseID string          `json:"previous_response_id"`
}

// messages returns the request's input as messages, its instructions first.
func (q *responsesRequest) messages() ([]inMessage, error) {
	var msgs []inMessage
	if q.Instructions != "" {
		msgs = append(msgs, inMessage{Role: "developer", Content: content{text: q.Instructions}})
	}
	var text string
	if err := json.Unmarshal(q.Input, &text); err == nil {
		return append(msgs, inMessage{Role: "user", Content: content{text: text}}), nil
	}
	var items []inMessage
	if err := json.Unmarshal(q.Input, &items); err != nil {
		return nil, fmt.Errorf("%w: input is a string or an array of messages: %v", errBadRequest, err)
	}
	return append(msgs, items...), nil
}

type outputText struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	Annotations []any  `json:"annotations"`
}

type outputItem struct {
	Type    string       `json:"type"`
	ID      string       `json:"id"`
	Status  string       `json:"status"`
	Role    string       `json:"role"`
	Content []outputText `json:"content"`
}

type responsesUsage struct {
	InputTokens        int64 `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int64 `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int64 `json:"total_tokens"`
}

func responsesUsageOf(u model.Usage) *responsesUsage {
	c := usageOf(u)
	r := &responsesUsage{InputTokens: c.PromptTokens, OutputTokens: c.CompletionTokens, TotalTokens: c.TotalTokens}
	r.InputTokensDetails.CachedTokens = u.CachedInputTokens
	return r
}

type response struct {
	ID                string          `json:"id"`
	Object            string          `json:"object"`
	CreatedAt         int64           `json:"created_at"`
	Status            string          `json:"status"`
	Model             string          `json:"model"`
	Output            []outputItem    `json:"output"`
	Usage             *responsesUsage `json:"usage"`
	Error             *errorObject    `json:"error"`
	IncompleteDetails *struct{}       `json:"incomplete_details"`
	Instructions      *string         `json:"instructions"`
	ParallelToolCalls bool            `json:"parallel_tool_calls"`
	ToolChoice        string          `json:"tool_choice"`
	Tools             []any           `json:"tools"`
	Metadata          map[string]any  `json:"metadata"`
}

// responses serves POST /v1/responses.
func (s *Server) responses(w http.ResponseWriter, r *http.Request) {
	var req responsesRequest
	if err := decodeBody(r, &req); err != nil {
		s.requestError(w, r, err)
		return
	}
	rn, ok := s.runner(w, req.Model)
	if !ok {
		return
	}
	msgs, refused := req.messages()
	switch {
	case len(req.Tools) > 0:
		refused = errClientTools
	case req.PreviousResponseID != "":
		refused = fmt.Errorf("%w: previous_response_id is not supported: continue a conversation with the %s header", errBadRequest, SessionHeader)
	}
	prompt, opts, last, resume, err := s.beginOrResume(r, req.Model, msgs, refused, req.Stream)
	if err != nil {
		s.requestError(w, r, err)
		return
	}
	w.Header().Set(RunHeader, opts.RunID)
	resp := response{
		ID: "resp_" + opts.RunID, Object: "response", CreatedAt: time.Now().Unix(), Status: "in_progress",
		Model: req.Model, Output: []outputItem{}, ToolChoice: "auto", Tools: []any{}, Metadata: map[string]any{},
	}
	if req.Instructions != "" {
		resp.Instructions = &req.Instructions
	}
	item := outputItem{Type: "message", ID: "msg_" + opts.RunID, Status: "in_progress", Role: "assistant", Content: []outputText{}}
	if !req.Stream {
		res, err := s.await(r, rn, prompt, opts)
		if err != nil {
			s.requestError(w, r, err)
			return
		}
		if res.Status != runner.Complete {
			s.runFailed(w, res)
			return
		}
		item.Status = "completed"
		item.Content = []outputText{{Type: "output_text", Text: res.Text, Annotations: []any{}}}
		resp.Status, resp.Output, resp.Usage = "completed", []outputItem{item}, responsesUsageOf(res.Usage)
		writeJSON(w, resp)
		return
	}
	ev := s.newStream(w, rn, opts.RunID, last)
	seq := 0
	send := func(typ string, fields map[string]any) error {
		fields["type"] = typ
		fields["sequence_number"] = seq
		seq++
		return ev.event(typ, fields)
	}
	if send("response.created", map[string]any{"response": resp}) != nil ||
		send("response.in_progress", map[string]any{"response": resp}) != nil {
		return
	}
	started := false
	part := func(text string) outputText { return outputText{Type: "output_text", Text: text, Annotations: []any{}} }
	open := func() {
		if started {
			return
		}
		started = true
		_ = send("response.output_item.added", map[string]any{"output_index": 0, "item": item})
		_ = send("response.content_part.added", map[string]any{"item_id": item.ID, "output_index": 0, "content_index": 0, "part": part("")})
	}
	var ts textStream
	tell := func(text string) {
		open()
		_ = send("response.output_text.delta", map[string]any{"item_id": item.ID, "output_index": 0, "content_index": 0, "delta": text, "logprobs": []any{}})
	}
	res, err := s.stream(r, rn, prompt, opts, ev, resume, func(p runner.Progress) { ts.progress(p, tell) })
	if err == nil && res.Status != runner.Complete {
		e := runError(res)
		resp.Status, resp.Error = "failed", &e
		_ = send("response.failed", map[string]any{"response": resp})
		return
	}
	if err != nil {
		_ = send("error", map[string]any{"code": "run_failed", "message": err.Error(), "param": nil})
		return
	}
	open()
	text := ts.finish(res.Text, tell)
	_ = send("response.output_text.done", map[string]any{"item_id": item.ID, "output_index": 0, "content_index": 0, "text": text, "logprobs": []any{}})
	_ = send("response.content_part.done", map[string]any{"item_id": item.ID, "output_index": 0, "content_index": 0, "part": part(text)})
	item.Status = "completed"
	item.Content = []outputText{part(text)}
	_ = send("response.output_item.done", map[string]any{"output_index": 0, "item": item})
	resp.Status, resp.Output, resp.Usage = "completed", []outputItem{item}, responsesUsageOf(res.Usage)
	_ = send("response.completed", map[string]any{"response": resp})
}
