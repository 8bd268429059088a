package server

import (
	"fmt"
	"net/http"
	"time"

	"github.com/calf-go/calf/internal/httperr"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/runner"
)

// chatRequest is the part of a chat completions request that the server
// reads. Sampling settings (temperature and the like) are the agent's own
// and are ignored.
type chatRequest struct {
	Model         string         `json:"model"`
	Messages      []inMessage    `json:"messages"`
	Stream        bool           `json:"stream"`
	StreamOptions *streamOptions `json:"stream_options"`
	N             *int           `json:"n"`
	Tools         []any          `json:"tools"`
	Functions     []any          `json:"functions"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type chatUsage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
}

func usageOf(u model.Usage) *chatUsage {
	total := u.TotalTokens
	if total == 0 {
		total = u.InputTokens + u.OutputTokens
	}
	return &chatUsage{PromptTokens: u.InputTokens, CompletionTokens: u.OutputTokens, TotalTokens: total}
}

type chatMessage struct {
	Role    string  `json:"role"`
	Content string  `json:"content"`
	Refusal *string `json:"refusal"`
}

type chatChoice struct {
	Index        int         `json:"index"`
	Message      chatMessage `json:"message"`
	FinishReason string      `json:"finish_reason"`
	Logprobs     *struct{}   `json:"logprobs"`
}

type chatCompletion struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []chatChoice `json:"choices"`
	Usage   *chatUsage   `json:"usage"`
}

type chunkDelta struct {
	Role    string  `json:"role,omitempty"`
	Content *string `json:"content,omitempty"`
}

type chunkChoice struct {
	Index        int        `json:"index"`
	Delta        chunkDelta `json:"delta"`
	FinishReason *string    `json:"finish_reason"`
	Logprobs     *struct{}  `json:"logprobs"`
}

type chatChunk struct {
	ID      string        `json:"id"`
	Object  string        `json:"object"`
	Created int64         `json:"created"`
	Model   string        `json:"model"`
	Choices []chunkChoice `json:"choices"`
	Usage   *chatUsage    `json:"usage,omitempty"`
}

// chatCompletions serves POST /v1/chat/completions.
func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request) {
	var req chatRequest
	if err := decodeBody(r, &req); err != nil {
		s.requestError(w, r, err)
		return
	}
	rn, ok := s.runner(w, req.Model)
	if !ok {
		return
	}
	var refused error
	switch {
	case len(req.Tools) > 0 || len(req.Functions) > 0:
		refused = errClientTools
	case req.N != nil && *req.N != 1:
		refused = fmt.Errorf("%w: n must be 1", errBadRequest)
	}
	prompt, opts, last, resume, err := s.beginOrResume(r, req.Model, req.Messages, refused, req.Stream)
	if err != nil {
		s.requestError(w, r, err)
		return
	}
	id := "chatcmpl-" + opts.RunID
	created := time.Now().Unix()
	w.Header().Set(RunHeader, opts.RunID)
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
		writeJSON(w, chatCompletion{
			ID: id, Object: "chat.completion", Created: created, Model: req.Model,
			Choices: []chatChoice{{Message: chatMessage{Role: "assistant", Content: res.Text}, FinishReason: "stop"}},
			Usage:   usageOf(res.Usage),
		})
		return
	}
	ev := s.newStream(w, rn, opts.RunID, last)
	chunk := func(d chunkDelta, finish *string) error {
		return ev.event("", chatChunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: req.Model, Choices: []chunkChoice{{Delta: d, FinishReason: finish}}})
	}
	empty := ""
	if chunk(chunkDelta{Role: "assistant", Content: &empty}, nil) != nil {
		return
	}
	var ts textStream
	tell := func(text string) { _ = chunk(chunkDelta{Content: &text}, nil) }
	res, err := s.stream(r, rn, prompt, opts, ev, resume, func(p runner.Progress) { ts.progress(p, tell) })
	switch {
	case err != nil:
		_ = ev.event("", errorBody{Error: errorObject{Message: err.Error(), Type: "server_error", Code: "run_failed"}})
		return
	case res.Status != runner.Complete:
		_ = ev.event("", errorBody{Error: runError(res)})
		return
	}
	ts.finish(res.Text, tell)
	stop := "stop"
	_ = chunk(chunkDelta{}, &stop)
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		_ = ev.event("", chatChunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: req.Model, Choices: []chunkChoice{}, Usage: usageOf(res.Usage)})
	}
	_ = ev.raw("", []byte("[DONE]"))
}

// runError describes a run that did not complete.
func runError(res *runner.Result) errorObject {
	msg := fmt.Sprintf("run %s %s", res.RunID, res.Status)
	if res.Error != "" {
		msg += ": " + res.Error
	}
	code := "run_" + string(res.Status)
	return errorObject{Message: msg, Type: "server_error", Code: code}
}

// runFailed answers a request whose run did not complete.
func (s *Server) runFailed(w http.ResponseWriter, res *runner.Result) {
	e := runError(res)
	var kind error // a failed or cancelled run: 500
	if res.Status == runner.Waiting {
		kind = httperr.ErrConflict
	}
	httperr.Write(w, &httperr.Error{Kind: kind, Type: e.Type, Code: e.Code, Message: e.Message})
}
