package anthropic

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/internal/transport"
)

// Defaults of [Options].
const (
	// DefaultBaseURL is Anthropic's API.
	DefaultBaseURL = "https://api.anthropic.com"
	// DefaultMaxTokens bounds a response when neither the request nor
	// Options.MaxTokens does. The API requires a bound; 8,192 tokens is
	// within what every Claude model since Claude 3.5 can write (the
	// Claude 3 models stop at 4,096: set MaxTokens for them).
	DefaultMaxTokens = 8192
	// DefaultMaxRetries is how many times a request is sent again by
	// default.
	DefaultMaxRetries = transport.DefaultMaxRetries
	// DefaultTimeout bounds each attempt by default.
	DefaultTimeout = transport.DefaultTimeout
)

// Version is the API version the adapter speaks, sent as the
// anthropic-version header.
const Version = "2023-06-01"

// provider names Anthropic in errors, and in the parts only its models
// can read back.
const provider = "anthropic"

// maxResponse bounds the body of a response that is not streamed.
const maxResponse = 64 << 20

// Caching says whether requests mark prompt-cache breakpoints.
type Caching string

// Prompt caching.
const (
	// CachingOn marks three breakpoints, {"type": "ephemeral"} (five
	// minutes), on the system prompt, the last tool and the last block of
	// the conversation. It is the default (the zero value).
	CachingOn Caching = ""
	// CachingOff marks none.
	CachingOff Caching = "off"
)

// Options configures a [Model].
type Options struct {
	// Model is the model to call, such as "claude-sonnet-4-5". Required.
	Model string
	// APIKey authenticates requests (the x-api-key header). Default:
	// $ANTHROPIC_API_KEY; New fails without one.
	APIKey string
	// BaseURL is the API's root, without /v1: requests go to
	// BaseURL + "/v1/messages". Default: $ANTHROPIC_BASE_URL, else
	// https://api.anthropic.com (DefaultBaseURL).
	BaseURL string
	// HTTPClient sends the requests. Default: a shared client whose
	// transport keeps up to 1,024 idle connections per host.
	HTTPClient *http.Client
	// MaxRetries is how many times a request is sent again after a rate
	// limit (429), a timeout (408), a conflict (409), a server error (5xx,
	// 529 overloaded among them) or a connection error, with exponential
	// backoff that honours the server's retry-after. Default: 2
	// (DefaultMaxRetries); a negative value disables retries.
	MaxRetries int
	// Timeout bounds each attempt of a request; for a streamed response it
	// bounds the whole stream. An attempt that times out is not retried.
	// Default: 2 minutes (DefaultTimeout); a negative value means no limit
	// other than ctx's. A long response with a large thinking budget may
	// need more.
	Timeout time.Duration
	// Headers are extra HTTP headers sent with every request, such as
	// "anthropic-beta": "interleaved-thinking-2025-05-14".
	Headers map[string]string
	// Logger receives a debug record per HTTP attempt. Default: none.
	Logger *slog.Logger
	// MaxTokens bounds a response whose request sets no
	// [model.Request.MaxTokens]. Default: 8,192 (DefaultMaxTokens).
	MaxTokens int
	// ThinkingBudget turns extended thinking on with that many tokens to
	// think in (the API's budget_tokens, at least 1,024); 0 leaves it
	// off. The API wants max_tokens above the budget: when a request's
	// bound is not, the budget is added to it, so that the answer keeps
	// the bound it had. With thinking on, no temperature is sent (the API
	// takes none but 1).
	ThinkingBudget int
	// PromptCaching says whether requests mark prompt-cache breakpoints.
	// Default: CachingOn.
	PromptCaching Caching
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
		slog.Int("max_tokens", o.MaxTokens),
		slog.Int("thinking_budget", o.ThinkingBudget),
		slog.String("prompt_caching", string(o.PromptCaching)),
	)
}

// Model is a [model.Model] that calls Anthropic's Messages API. It also
// streams. A Model is safe for concurrent use.
type Model struct {
	model     string
	url       string
	header    http.Header
	maxTokens int
	thinking  int
	caching   bool
	client    *transport.Client
}

var (
	_ model.Model    = (*Model)(nil)
	_ model.Streamer = (*Model)(nil)
)

// New returns a model configured by opts. It fails with an error matching
// [model.ErrNoModel] when opts names no model or when there is no API key
// (in opts or ANTHROPIC_API_KEY).
func New(opts Options) (*Model, error) {
	if opts.Model == "" {
		return nil, fmt.Errorf("%w: anthropic: Options.Model is empty", model.ErrNoModel)
	}
	if opts.APIKey == "" {
		opts.APIKey = os.Getenv("ANTHROPIC_API_KEY")
	}
	if opts.APIKey == "" {
		return nil, fmt.Errorf("%w: anthropic: no API key: set ANTHROPIC_API_KEY or Options.APIKey", model.ErrNoModel)
	}
	if opts.BaseURL == "" {
		opts.BaseURL = os.Getenv("ANTHROPIC_BASE_URL")
	}
	if opts.BaseURL == "" {
		opts.BaseURL = DefaultBaseURL
	}
	u, err := url.Parse(opts.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("anthropic: invalid base URL %q: want http(s)://host[:port][/path]", opts.BaseURL)
	}
	if opts.MaxTokens < 0 || opts.ThinkingBudget < 0 {
		return nil, fmt.Errorf("anthropic: Options.MaxTokens and Options.ThinkingBudget must not be negative")
	}
	switch opts.PromptCaching {
	case CachingOn, CachingOff:
	default:
		return nil, fmt.Errorf("anthropic: Options.PromptCaching %q: want CachingOn or CachingOff", opts.PromptCaching)
	}
	h := http.Header{}
	for k, v := range opts.Headers {
		h.Set(k, v)
	}
	h.Set("X-Api-Key", opts.APIKey)
	h.Set("Anthropic-Version", Version)
	h.Set("Content-Type", "application/json")
	base := strings.TrimSuffix(strings.TrimRight(opts.BaseURL, "/"), "/v1")
	return &Model{
		model:     opts.Model,
		url:       base + "/v1/messages",
		header:    h,
		maxTokens: cmp.Or(opts.MaxTokens, DefaultMaxTokens),
		thinking:  opts.ThinkingBudget,
		caching:   opts.PromptCaching == CachingOn,
		client: transport.New(transport.Options{
			Provider:   provider,
			HTTPClient: opts.HTTPClient,
			MaxRetries: opts.MaxRetries,
			Timeout:    opts.Timeout,
			Logger:     opts.Logger,
		}),
	}, nil
}

// FromEnv returns a model named name configured from the environment:
// ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL. Without a key, the error,
// which matches [model.ErrNoModel], says what to set.
func FromEnv(name string) (*Model, error) {
	return New(Options{Model: name})
}

// Name returns "anthropic:" followed by the model name.
func (m *Model) Name() string { return provider + ":" + m.model }

// Generate sends req to the Messages API and returns the response.
//
// Errors: an HTTP error from the API is a *[model.StatusError], which
// matches [model.ErrRateLimited], [model.ErrOverloaded],
// [model.ErrContextTooLong], [model.ErrAuthentication] or
// [model.ErrInvalidRequest] as its kind is; a request that runs out of
// time (ctx's deadline or [Options.Timeout]) matches [model.ErrTimeout];
// a cancelled ctx yields ctx's error.
func (m *Model) Generate(ctx context.Context, req *model.Request) (*model.Response, error) {
	body, err := m.body(req, false)
	if err != nil {
		return nil, err
	}
	resp, err := m.client.Do(ctx, &transport.Request{URL: m.url, Header: m.header, Body: body})
	if err != nil {
		return nil, err
	}
	defer resp.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse+1))
	if err != nil {
		return nil, m.readError(ctx, err)
	}
	if len(data) > maxResponse {
		return nil, fmt.Errorf("anthropic: %s: response over %d MiB", m.model, maxResponse>>20)
	}
	var w wireResponse
	if err := json.Unmarshal(data, &w); err != nil {
		return nil, fmt.Errorf("anthropic: %s: the answer (content type %q) is not a JSON message: %w",
			m.model, resp.Header.Get("Content-Type"), err)
	}
	return response(&w)
}

// readError is the error of a response body that could not be read.
func (m *Model) readError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		err = context.Cause(ctx)
	}
	if isDeadline(err) {
		return fmt.Errorf("anthropic: %s: %w: %w", m.model, model.ErrTimeout, err)
	}
	return fmt.Errorf("anthropic: %s: reading the response: %w", m.model, err)
}

func isDeadline(err error) bool { return errors.Is(err, context.DeadlineExceeded) }

// requestID returns the API's id of the request.
func requestID(h http.Header) string { return h.Get("Request-Id") }

// body encodes req as the JSON body of a Messages request.
func (m *Model) body(req *model.Request, stream bool) ([]byte, error) {
	w, err := m.request(req)
	if err != nil {
		return nil, err
	}
	w.Stream = stream
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	// Text goes back as the API sent it: a thinking block's text is
	// signed, and although escapes do not change it, sending it as it
	// came is the plainest way to keep it unchanged.
	enc.SetEscapeHTML(false)
	if err := enc.Encode(w); err != nil {
		for _, t := range req.Tools {
			if len(t.Parameters) > 0 && !json.Valid(t.Parameters) {
				return nil, fmt.Errorf("anthropic: tool %q: parameters: schema is not valid JSON", t.Name)
			}
		}
		if req.Output != nil && !json.Valid(req.Output.Schema) {
			return nil, fmt.Errorf("anthropic: output schema is not valid JSON")
		}
		return nil, fmt.Errorf("anthropic: encode request: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
