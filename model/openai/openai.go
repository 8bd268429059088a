package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/calf-go/calf/model"
)

// Defaults of [Options].
const (
	DefaultMaxRetries = 2
	DefaultTimeout    = 2 * time.Minute
)

// Options configures a [Model].
type Options struct {
	// Model is the model to call, such as "gpt-4o-mini" or, on a local
	// server, "llama3.2". Required.
	Model string
	// APIKey authenticates requests. Default: $OPENAI_API_KEY. It is
	// optional when BaseURL is set, since local servers need none; without
	// a key no Authorization header is sent.
	APIKey string
	// BaseURL is the API's base URL, ending in /v1, for an OpenAI-compatible
	// server such as Ollama ("http://127.0.0.1:11434/v1"), vLLM, llama.cpp
	// or OpenRouter ("https://openrouter.ai/api/v1"). Default:
	// $OPENAI_BASE_URL, else OpenAI's API.
	BaseURL string
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
}

// LogValue returns the options with the API key redacted.
func (o Options) LogValue() slog.Value {
	key := ""
	if o.APIKey != "" {
		key = "REDACTED"
	}
	return slog.GroupValue(
		slog.String("model", o.Model),
		slog.String("base_url", o.BaseURL),
		slog.String("api_key", key),
		slog.Int("max_retries", o.MaxRetries),
		slog.Duration("timeout", o.Timeout),
	)
}

// ErrEmptyResponse is returned when the server answers with no choices.
var ErrEmptyResponse = errors.New("openai: response has no choices")

// Model is a [model.Model] that calls the OpenAI chat completions API or
// any server compatible with it. It also streams. A Model is safe for
// concurrent use.
type Model struct {
	model  string
	client sdk.Client
	// unversioned is the base URL when its path does not end in /v1, for
	// the hint of a 404 or 405 (see wrapError); else empty.
	unversioned string
	// completionTokens sends max_completion_tokens instead of max_tokens.
	completionTokens bool
}

var (
	_ model.Model    = (*Model)(nil)
	_ model.Streamer = (*Model)(nil)
)

// defaultHTTPClient keeps enough idle connections per host for as many
// concurrent runs against one server as a worker works on by default
// (1,024); net/http's default keeps two, so a busy worker would open and
// close a connection for most requests.
var defaultHTTPClient = &http.Client{Transport: func() http.RoundTripper {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 2048
	t.MaxIdleConnsPerHost = 1024
	return t
}()}

// defaultBaseURL is OpenAI's API.
const defaultBaseURL = "https://api.openai.com/v1"

// missingConfig says what to set when there is neither an API key nor a
// base URL.
const missingConfig = "set OPENAI_API_KEY, or OPENAI_BASE_URL for an OpenAI-compatible server such as Ollama (http://127.0.0.1:11434/v1)"

// New returns a model configured by opts. It fails with an error matching
// [model.ErrNoModel] when opts names no model, or when there is neither an
// API key nor a base URL (in opts or the environment).
func New(opts Options) (*Model, error) {
	c, u, err := newClient(opts)
	if err != nil {
		return nil, err
	}
	return &Model{
		model: opts.Model,
		// OpenAI's own API wants max_completion_tokens (its reasoning models
		// reject max_tokens); other servers reliably understand max_tokens.
		completionTokens: u.Host == "api.openai.com",
		client:           c,
		unversioned:      unversioned(u),
	}, nil
}

// unversioned returns the base URL u when its path does not end in /v1,
// where OpenAI-compatible servers serve the API, and "" when it does.
func unversioned(u *url.URL) string {
	if strings.HasSuffix(strings.TrimRight(u.Path, "/"), "/v1") {
		return ""
	}
	return u.Redacted()
}

// newClient returns the API client opts configure, and the base URL.
func newClient(opts Options) (sdk.Client, *url.URL, error) {
	if opts.Model == "" {
		return sdk.Client{}, nil, fmt.Errorf("%w: openai: Options.Model is empty", model.ErrNoModel)
	}
	if opts.APIKey == "" {
		opts.APIKey = os.Getenv("OPENAI_API_KEY")
	}
	if opts.BaseURL == "" {
		opts.BaseURL = os.Getenv("OPENAI_BASE_URL")
	}
	if opts.APIKey == "" && opts.BaseURL == "" {
		return sdk.Client{}, nil, fmt.Errorf("%w: openai: %s", model.ErrNoModel, missingConfig)
	}
	if opts.BaseURL == "" {
		opts.BaseURL = defaultBaseURL
	}
	u, err := url.Parse(opts.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return sdk.Client{}, nil, fmt.Errorf("openai: invalid base URL %q: want http(s)://host[:port]/path", opts.BaseURL)
	}
	ro := []option.RequestOption{option.WithBaseURL(opts.BaseURL)}
	if opts.APIKey != "" {
		ro = append(ro, option.WithAPIKey(opts.APIKey))
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = defaultHTTPClient
	}
	ro = append(ro, option.WithHTTPClient(opts.HTTPClient))
	switch {
	case opts.MaxRetries < 0:
		ro = append(ro, option.WithMaxRetries(0))
	case opts.MaxRetries == 0:
		ro = append(ro, option.WithMaxRetries(DefaultMaxRetries))
	default:
		ro = append(ro, option.WithMaxRetries(opts.MaxRetries))
	}
	switch {
	case opts.Timeout == 0:
		ro = append(ro, option.WithRequestTimeout(DefaultTimeout))
	case opts.Timeout > 0:
		ro = append(ro, option.WithRequestTimeout(opts.Timeout))
	}
	for k, v := range opts.Headers {
		ro = append(ro, option.WithHeader(k, v))
	}
	ro = append(ro, option.WithMiddleware(inMemoryBody))
	if opts.Logger != nil {
		ro = append(ro, option.WithMiddleware(logAttempts(opts.Logger)))
	}
	return sdk.NewClient(ro...), u, nil
}

// FromEnv returns a model named name configured from the environment:
// OPENAI_API_KEY and OPENAI_BASE_URL. When neither is set, the error, which
// matches [model.ErrNoModel], says what to set.
func FromEnv(name string) (*Model, error) {
	return New(Options{Model: name})
}

// inMemoryBody is middleware that hands net/http each attempt's body as
// the in-memory reader it is. The SDK wraps the body of every attempt in a
// reader of its own, which net/http cannot tell from a stream: it would
// then send the headers and the body in two writes (and two TCP segments)
// instead of one. The request's GetBody, which the SDK sets for the bytes
// this adapter sends, gives a fresh reader over the same bytes that net/http
// recognises.
func inMemoryBody(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	if r.GetBody != nil && r.Body != nil && r.Body != http.NoBody {
		if body, err := r.GetBody(); err == nil {
			orig := r.Body
			r.Body = body
			defer orig.Close()
		}
	}
	return next(r)
}

// logAttempts returns middleware that logs each HTTP attempt at debug level.
func logAttempts(log *slog.Logger) option.Middleware {
	return func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		start := time.Now()
		resp, err := next(r)
		attrs := []slog.Attr{
			slog.String("method", r.Method),
			slog.String("path", r.URL.Path),
			slog.String("retry", r.Header.Get("X-Stainless-Retry-Count")),
			slog.Duration("duration", time.Since(start)),
		}
		if err != nil {
			attrs = append(attrs, slog.String("error", err.Error()))
		} else {
			attrs = append(attrs, slog.Int("status", resp.StatusCode))
		}
		log.LogAttrs(r.Context(), slog.LevelDebug, "openai: http attempt", attrs...)
		return resp, err
	}
}

// Name returns "openai:" followed by the model name.
func (m *Model) Name() string { return "openai:" + m.model }

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
	var raw *http.Response
	var contents []byte // the body of a JSON answer, as the SDK read it
	if err := m.client.Post(ctx, "chat/completions", body, &contents, option.WithResponseInto(&raw)); err != nil {
		return nil, m.wrapError(ctx, err, raw)
	}
	var completion wireCompletion
	if err := json.Unmarshal(contents, &completion); err != nil {
		ct := ""
		if raw != nil {
			ct = raw.Header.Get("Content-Type")
		}
		return nil, fmt.Errorf("openai: %s: the answer (content type %q) is not a JSON chat completion: %w", m.model, ct, err)
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
	body, err := json.Marshal(w)
	if err != nil {
		// Name the tool whose schema is not JSON, which request checks
		// only for being an object.
		for _, t := range req.Tools {
			if len(t.Parameters) > 0 && !json.Valid(t.Parameters) {
				return nil, fmt.Errorf("openai: tool %q: parameters: schema is not valid JSON", t.Name)
			}
		}
		return nil, fmt.Errorf("openai: encode request: %w", err)
	}
	return body, nil
}

// GenerateStream sends req as a streamed chat completion. It yields text
// and tool-call deltas as they arrive and the complete response last, and
// closes the stream when the consumer stops early or ctx is done. Errors
// are those of [Model.Generate].
func (m *Model) GenerateStream(ctx context.Context, req *model.Request) iter.Seq2[model.Chunk, error] {
	return func(yield func(model.Chunk, error) bool) {
		body, err := m.body(req, true)
		if err != nil {
			yield(model.Chunk{}, err)
			return
		}
		var raw *http.Response
		err = m.client.Post(ctx, "chat/completions", body, &raw)
		stream := ssestream.NewStream[wireCompletion](ssestream.NewDecoder(raw), err)
		defer stream.Close()
		var acc accumulator
		for stream.Next() {
			chunk := stream.Current()
			if !acc.add(&chunk) {
				yield(model.Chunk{}, fmt.Errorf("openai: %s: malformed stream chunk", m.model))
				return
			}
			for _, choice := range chunk.Choices {
				if choice.Index != 0 {
					continue
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
		if err := stream.Err(); err != nil {
			yield(model.Chunk{}, m.wrapError(ctx, err, raw))
			return
		}
		resp, err := m.response(&acc.c)
		if err != nil {
			yield(model.Chunk{}, err)
			return
		}
		yield(model.Chunk{Response: resp}, nil)
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
