package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/internal/transport"
)

// Defaults of [Options].
const (
	DefaultMaxRetries = transport.DefaultMaxRetries
	DefaultTimeout    = transport.DefaultTimeout
)

// Options configures a [Model], a [ResponsesModel] or an [Embedder].
type Options struct {
	// Model is the model to call, such as "gpt-4o-mini" or, on a local
	// server, "llama3.2". Required.
	Model string
	// APIKey authenticates requests. Default: $OPENAI_API_KEY
	// ($AZURE_OPENAI_API_KEY with Azure). It is optional when BaseURL is
	// set, since local servers need none; without a key no Authorization
	// header is sent.
	APIKey string
	// BaseURL is the API's base URL, ending in /v1, for an OpenAI-compatible
	// server such as Ollama ("http://127.0.0.1:11434/v1"), vLLM, llama.cpp
	// or OpenRouter ("https://openrouter.ai/api/v1"). Default:
	// $OPENAI_BASE_URL, else OpenAI's API.
	BaseURL string
	// Azure, when set, calls a deployment on Azure OpenAI instead (see
	// [AzureOptions]); BaseURL must then be empty.
	Azure *AzureOptions
	// HTTPClient sends the requests. Default: a shared client whose
	// transport keeps up to 1,024 idle connections per host, so that many
	// concurrent runs reuse connections.
	HTTPClient *http.Client
	// MaxRetries is how many times a request is sent again after a rate
	// limit (429), a timeout (408), a conflict (409), a server error (5xx)
	// or a connection error, with exponential backoff that honours the
	// server's Retry-After. Default: 2 (DefaultMaxRetries); a negative
	// value disables retries.
	MaxRetries int
	// Timeout bounds each attempt of a request; for a streamed response it
	// bounds the whole stream. An attempt that times out is not retried.
	// Default: 2 minutes (DefaultTimeout); a negative value means no limit
	// other than ctx's.
	Timeout time.Duration
	// Headers are extra HTTP headers sent with every request, such as
	// OpenRouter's "HTTP-Referer" and "X-Title".
	Headers map[string]string
	// Logger receives a debug record per HTTP attempt. Default: none.
	Logger *slog.Logger
	// ReasoningEffort, when set, asks a reasoning model for that much
	// reasoning: "minimal", "low", "medium" or "high" (as the model
	// allows). It is sent as reasoning_effort in a chat completion and as
	// reasoning.effort to the Responses API. Default: the model's.
	ReasoningEffort string
	// ReasoningSummary, when set, asks the Responses API for a summary of
	// the model's reasoning ("auto", "concise" or "detailed"), which comes
	// back as the text of thinking parts. Only [ResponsesModel] sends it.
	// Default: none.
	ReasoningSummary string
	// SendReasoning sends the shown reasoning of an assistant message that
	// has tool calls back in the message's reasoning_content field, as
	// DeepSeek's thinking mode requires of the turns in which the model
	// called tools (without it, the next request fails with HTTP 400).
	// Servers that show reasoning (reasoning_content, reasoning or
	// reasoning_details in a message or a delta) give thinking parts in
	// any case; this only says whether they go back. Default: true for
	// DeepSeek's API (host api.deepseek.com), false otherwise, since
	// OpenAI's API rejects fields it does not know in a message. Only
	// [Model] sends it.
	SendReasoning bool
	// Store lets the Responses API keep the responses it makes (its store
	// parameter). Default: false, so nothing is kept at OpenAI: each
	// request carries the whole conversation, and the reasoning of earlier
	// turns goes back encrypted (include reasoning.encrypted_content).
	// Only [ResponsesModel] sends it.
	Store bool
}

// LogValue returns the options with the API key redacted.
func (o Options) LogValue() slog.Value {
	key := ""
	if o.APIKey != "" {
		key = "REDACTED"
	}
	attrs := []slog.Attr{
		slog.String("model", o.Model),
		slog.String("base_url", o.BaseURL),
		slog.String("api_key", key),
		slog.Int("max_retries", o.MaxRetries),
		slog.Duration("timeout", o.Timeout),
	}
	if o.Azure != nil {
		attrs = append(attrs, slog.String("azure_endpoint", o.Azure.Endpoint), slog.String("azure_deployment", o.Azure.Deployment))
	}
	return slog.GroupValue(attrs...)
}

// ErrEmptyResponse is returned when the server answers with no choices.
var ErrEmptyResponse = errors.New("openai: response has no choices")

// Model is a [model.Model] that calls the OpenAI chat completions API or
// any server compatible with it. It also streams. A Model is safe for
// concurrent use.
type Model struct {
	ep *endpoint
	// url is the URL of chat completions.
	url string
	// effort is Options.ReasoningEffort.
	effort string
	// sendReasoning is Options.SendReasoning, or the default for the
	// server.
	sendReasoning bool
}

var (
	_ model.Model    = (*Model)(nil)
	_ model.Streamer = (*Model)(nil)
)

// New returns a model configured by opts. It fails with an error matching
// [model.ErrNoModel] when opts names no model, or when there is neither an
// API key nor a base URL (in opts or the environment), or, for Azure, no
// endpoint or no key.
func New(opts Options) (*Model, error) {
	ep, err := newEndpoint(opts)
	if err != nil {
		return nil, err
	}
	return &Model{ep: ep, url: ep.url("chat/completions"), effort: opts.ReasoningEffort,
		sendReasoning: opts.SendReasoning || ep.host == "api.deepseek.com"}, nil
}

// FromEnv returns a model named name configured from the environment:
// OPENAI_API_KEY and OPENAI_BASE_URL; or, when neither is set and
// AZURE_OPENAI_ENDPOINT is, Azure OpenAI with the deployment name (see
// [AzureOptions]: AZURE_OPENAI_API_KEY, OPENAI_API_VERSION). When nothing
// is set, the error, which matches [model.ErrNoModel], says what to set.
func FromEnv(name string) (*Model, error) {
	return New(envOptions(name))
}

// envOptions are the options of a model configured by the environment.
func envOptions(name string) Options {
	o := Options{Model: name}
	if os.Getenv("OPENAI_API_KEY") == "" && os.Getenv("OPENAI_BASE_URL") == "" && os.Getenv("AZURE_OPENAI_ENDPOINT") != "" {
		o.Azure = &AzureOptions{}
	}
	return o
}

// Name returns "openai:" followed by the model name.
func (m *Model) Name() string { return "openai:" + m.ep.model }

// Generate sends req as a chat completion and returns the response.
//
// Errors: an HTTP error from the server is a *[model.StatusError]; a
// request that runs out of time (ctx's deadline or [Options.Timeout])
// matches [model.ErrTimeout] and, when that was the cause,
// [context.DeadlineExceeded]; a cancelled ctx yields ctx's error.
func (m *Model) Generate(ctx context.Context, req *model.Request) (*model.Response, error) {
	body, err := m.body(req, false)
	if err != nil {
		return nil, err
	}
	var completion wireCompletion
	if err := m.ep.postJSON(ctx, m.url, body, &completion, "a JSON chat completion"); err != nil {
		return nil, err
	}
	if completion.Error != nil {
		return nil, completion.Error.statusError()
	}
	return m.response(&completion)
}

// body encodes req as the JSON body of a chat completion request.
func (m *Model) body(req *model.Request, stream bool) ([]byte, error) {
	w, err := m.request(req)
	if err != nil {
		return nil, err
	}
	if stream {
		w.Stream = true
		w.StreamOptions = &wireStreamOptions{IncludeUsage: true}
	}
	body, err := w.appendJSON(make([]byte, 0, w.sizeHint()))
	if err != nil {
		return nil, encodeError(req, err)
	}
	return body, nil
}

// encodeError is the error of a request that does not encode. It names the
// tool whose schema is not JSON, which the conversion checks only for being
// an object.
func encodeError(req *model.Request, err error) error {
	for _, t := range req.Tools {
		if len(t.Parameters) > 0 && !json.Valid(t.Parameters) {
			return fmt.Errorf("openai: tool %q: parameters: schema is not valid JSON", t.Name)
		}
	}
	return fmt.Errorf("openai: encode request: %w", err)
}

// GenerateStream sends req as a streamed chat completion (with
// stream_options.include_usage, so that the usage comes in the last
// chunk). It yields text and tool-call deltas as they arrive and the
// complete response last, and closes the stream when the consumer stops
// early or ctx is done. A stream that ends before the server's [DONE]
// marker, unless it has sent the finish reason and the usage, is an error
// matching [io.ErrUnexpectedEOF], never a truncated response; an error chunk in the
// stream is a *[model.StatusError]. Other errors are those of
// [Model.Generate].
func (m *Model) GenerateStream(ctx context.Context, req *model.Request) iter.Seq2[model.Chunk, error] {
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
		events := transport.NewSSEReader(resp.Body)
		var acc accumulator
		done := false
		for !done {
			ev, err := events.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				yield(model.Chunk{}, m.ep.readError(ctx, err))
				return
			}
			if ev.Data == "[DONE]" {
				done = true
				break
			}
			var chunk wireCompletion
			if err := json.Unmarshal([]byte(ev.Data), &chunk); err != nil {
				yield(model.Chunk{}, fmt.Errorf("openai: %s: malformed stream chunk: %w", m.ep.model, err))
				return
			}
			if chunk.Error != nil {
				yield(model.Chunk{}, chunk.Error.statusError())
				return
			}
			if !acc.add(&chunk) {
				yield(model.Chunk{}, fmt.Errorf("openai: %s: malformed stream chunk: a tool call out of order", m.ep.model))
				return
			}
			for _, choice := range chunk.Choices {
				if choice.Index != 0 {
					continue
				}
				if t := choice.Delta.thinking(); t != "" {
					if !yield(model.Chunk{Delta: &model.Delta{Thinking: t}}, nil) {
						return
					}
				}
				if choice.Delta.Content != "" {
					if !yield(model.Chunk{Delta: &model.Delta{Text: choice.Delta.Content}}, nil) {
						return
					}
				}
				for _, tc := range choice.Delta.ToolCalls {
					d := &model.ToolCallDelta{
						Index:     max(deref(tc.Index), 0),
						ID:        tc.ID,
						Name:      tc.Function.Name,
						Arguments: tc.Function.Arguments,
					}
					if !yield(model.Chunk{Delta: &model.Delta{ToolCall: d}}, nil) {
						return
					}
				}
			}
		}
		if !done && !acc.finished() {
			yield(model.Chunk{}, m.ep.errStreamCut())
			return
		}
		r, err := m.response(&acc.c)
		if err != nil {
			yield(model.Chunk{}, err)
			return
		}
		yield(model.Chunk{Response: r}, nil)
	}
}

func deref(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

// accumulator builds the completion of a stream from its chunks: the first
// choice's text and tool calls, its finish reason, and the usage.
type accumulator struct {
	c wireCompletion
}

// finished reports whether the stream has sent all it has to send but
// the [DONE] marker, which a server may leave out: the first choice's
// finish reason and the usage.
func (a *accumulator) finished() bool {
	return len(a.c.Choices) > 0 && a.c.Choices[0].FinishReason != "" && a.c.Usage != nil
}

// add adds a chunk. It reports false for a chunk that cannot continue the
// stream: a tool-call piece with an index out of order.
func (a *accumulator) add(ch *wireCompletion) bool {
	if a.c.ID == "" {
		a.c.ID = ch.ID
	}
	if a.c.Model == "" {
		a.c.Model = ch.Model
	}
	if ch.Usage != nil {
		a.c.Usage = ch.Usage
	}
	for i := range ch.Choices {
		d := &ch.Choices[i]
		if d.Index != 0 {
			continue
		}
		if len(a.c.Choices) == 0 {
			a.c.Choices = []wireChoice{{}}
		}
		c := &a.c.Choices[0]
		c.Message.Content += d.Delta.Content
		c.Message.Refusal += d.Delta.Refusal
		c.Message.ReasoningContent += d.Delta.thinking()
		if d.FinishReason != "" {
			c.FinishReason = d.FinishReason
		}
		for _, tc := range d.Delta.ToolCalls {
			idx := deref(tc.Index)
			switch {
			case idx < 0 || idx > len(c.Message.ToolCalls):
				return false
			case idx == len(c.Message.ToolCalls):
				c.Message.ToolCalls = append(c.Message.ToolCalls, wireToolCall{ID: tc.ID, Type: tc.Type, Function: tc.Function})
			default:
				t := &c.Message.ToolCalls[idx]
				if tc.ID != "" {
					t.ID = tc.ID
				}
				if tc.Type != "" {
					t.Type = tc.Type
				}
				t.Function.Name += tc.Function.Name
				t.Function.Arguments += tc.Function.Arguments
			}
		}
	}
	return true
}
