package gemini

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/internal/transport"
)

// provider names Gemini in errors, signatures and [model.ForProvider].
const provider = "gemini"

// Defaults of [Options].
const (
	DefaultBaseURL    = "https://generativelanguage.googleapis.com"
	DefaultAPIVersion = "v1beta"
	DefaultMaxRetries = transport.DefaultMaxRetries
	DefaultTimeout    = transport.DefaultTimeout
)

// Special values of [Options.ThinkingBudget].
const (
	// ThinkingDynamic lets the model decide how much to think (the API's
	// thinkingBudget -1), and asks for thought summaries.
	ThinkingDynamic = -1
	// ThinkingOff turns thinking off (the API's thinkingBudget 0) on the
	// models that allow it.
	ThinkingOff = -2
)

// Options configures a [Model].
type Options struct {
	// Model is the model to call, such as "gemini-2.5-flash" (a leading
	// "models/" is accepted, and "tunedModels/..." names a tuned model).
	// Required.
	Model string
	// APIKey authenticates requests; it is sent in the x-goog-api-key
	// header, never in the URL. Default: $GEMINI_API_KEY, else
	// $GOOGLE_API_KEY. Required.
	APIKey string
	// BaseURL is the API's base URL, without the version. Default:
	// $GEMINI_BASE_URL, else https://generativelanguage.googleapis.com.
	BaseURL string
	// APIVersion is the version of the API in the path. Default: v1beta,
	// the version with thinking, thought signatures and function-call ids.
	APIVersion string
	// HTTPClient sends the requests. Default: a shared client whose
	// transport keeps up to 1,024 idle connections per host.
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
	// Headers are extra HTTP headers sent with every request.
	Headers map[string]string
	// Logger receives a debug record per HTTP attempt. Default: none.
	Logger *slog.Logger
	// ThinkingBudget sets generationConfig.thinkingConfig, for the models
	// that think (Gemini 2.5 and later). 0, the default, sends none: the
	// model thinks as much as it does by default and returns no thought
	// summaries. A positive value bounds the thinking tokens and asks for
	// thought summaries (includeThoughts), which arrive as thinking parts
	// and [model.Delta.Thinking]; [ThinkingDynamic] lets the model choose
	// the budget, with summaries; [ThinkingOff] turns thinking off where
	// the model allows it. Thinking tokens are output tokens, counted in
	// [model.Usage.ReasoningTokens] too.
	ThinkingBudget int
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
		slog.String("api_version", o.APIVersion),
		slog.String("api_key", key),
		slog.Int("max_retries", o.MaxRetries),
		slog.Duration("timeout", o.Timeout),
		slog.Int("thinking_budget", o.ThinkingBudget),
	)
}

// Model is a [model.Model] for Google's Gemini models through the
// Generative Language API. It also streams ([model.Streamer]) and checks
// schemas ([model.SchemaChecker]). A Model is safe for concurrent use.
type Model struct {
	*client
	thinking int
	// jsonInPrompt is set once the API has refused an output schema
	// together with function calling (Gemini before 3): the schema then
	// goes in the system instruction of requests with tools.
	jsonInPrompt atomic.Bool
}

var (
	_ model.Model         = (*Model)(nil)
	_ model.Streamer      = (*Model)(nil)
	_ model.SchemaChecker = (*Model)(nil)
)

// missingKey says what to set when there is no API key.
const missingKey = "set GEMINI_API_KEY (or GOOGLE_API_KEY) to a Gemini API key, or Options.APIKey"

// New returns a model configured by opts. It fails with an error matching
// [model.ErrNoModel] when opts names no model or there is no API key (in
// opts or the environment).
func New(opts Options) (*Model, error) {
	c, err := newClient(&opts)
	if err != nil {
		return nil, err
	}
	if opts.ThinkingBudget < ThinkingOff {
		return nil, fmt.Errorf("gemini: Options.ThinkingBudget %d: want a positive budget, 0, ThinkingDynamic or ThinkingOff", opts.ThinkingBudget)
	}
	return &Model{client: c, thinking: opts.ThinkingBudget}, nil
}

// FromEnv returns a model named name configured from the environment:
// GEMINI_API_KEY (or GOOGLE_API_KEY) and GEMINI_BASE_URL. Without a key,
// the error, which matches [model.ErrNoModel], says what to set.
func FromEnv(name string) (*Model, error) {
	return New(Options{Model: name})
}

// client is what a Model and an Embedder share: the endpoint, the headers
// and the transport.
type client struct {
	name     string // the model's name, without "models/"
	resource string // "models/NAME" or "tunedModels/NAME"
	base     string // the base URL and the version, without a trailing slash
	header   http.Header
	http     *transport.Client
}

func newClient(opts *Options) (*client, error) {
	name := strings.TrimSpace(opts.Model)
	if name == "" {
		return nil, fmt.Errorf("%w: gemini: Options.Model is empty", model.ErrNoModel)
	}
	resource := name
	if !strings.Contains(name, "/") {
		resource = "models/" + name
	}
	name = strings.TrimPrefix(name, "models/")
	key := opts.APIKey
	if key == "" {
		key = os.Getenv("GEMINI_API_KEY")
	}
	if key == "" {
		key = os.Getenv("GOOGLE_API_KEY")
	}
	if key == "" {
		return nil, fmt.Errorf("%w: gemini: no API key: %s", model.ErrNoModel, missingKey)
	}
	base := opts.BaseURL
	if base == "" {
		base = os.Getenv("GEMINI_BASE_URL")
	}
	if base == "" {
		base = DefaultBaseURL
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("gemini: invalid base URL %q: want http(s)://host[:port][/path]", base)
	}
	version := opts.APIVersion
	if version == "" {
		version = DefaultAPIVersion
	}
	h := http.Header{}
	for k, v := range opts.Headers {
		h.Set(k, v)
	}
	h.Set("X-Goog-Api-Key", key)
	return &client{
		name:     name,
		resource: resource,
		base:     strings.TrimRight(base, "/") + "/" + strings.Trim(version, "/"),
		header:   h,
		http: transport.New(transport.Options{
			Provider:    provider,
			HTTPClient:  opts.HTTPClient,
			MaxRetries:  opts.MaxRetries,
			Timeout:     opts.Timeout,
			Logger:      opts.Logger,
			DecodeError: decodeError,
		}),
	}, nil
}

// do posts body to the model's method.
func (c *client) do(ctx context.Context, method string, body []byte) (*transport.Response, error) {
	resp, err := c.http.Do(ctx, &transport.Request{URL: c.url(method), Header: c.header, Body: body})
	if err != nil {
		return nil, authError(err)
	}
	return resp, nil
}

// url returns the URL of the model's method, such as generateContent.
func (c *client) url(method string) string {
	return c.base + "/" + escapePath(c.resource) + ":" + method
}

// escapePath escapes each segment of a resource name.
func escapePath(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}

// Name returns "gemini:" followed by the model name.
func (m *Model) Name() string { return "gemini:" + m.name }

// Generate sends req to generateContent and returns the response.
//
// Errors: an HTTP error from the API is a *[model.StatusError]; a response
// blocked by the API's filters is a *[BlockedError] (matching [ErrBlocked]
// and [ErrSafety], [ErrRecitation], ... by reason); a schema the API
// cannot take is a *[SchemaError]; a request that runs out of time (ctx's
// deadline or [Options.Timeout]) matches [model.ErrTimeout] and, when that
// was the cause, [context.DeadlineExceeded]; a cancelled ctx yields ctx's
// error.
func (m *Model) Generate(ctx context.Context, req *model.Request) (*model.Response, error) {
	resp, inPrompt, err := m.send(ctx, req, "generateContent")
	if err != nil {
		return nil, err
	}
	defer resp.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, m.readError(ctx, err)
	}
	var w wireResponse
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, fmt.Errorf("gemini: %s: the answer (content type %q) is not a JSON GenerateContentResponse: %w",
			m.name, resp.Header.Get("Content-Type"), err)
	}
	if len(w.Error) > 0 {
		return nil, m.eventError(&w, body)
	}
	acc := m.newAccumulator(inPrompt && req.Output != nil)
	acc.add(&w, nil)
	return acc.response(false)
}

// GenerateStream sends req to streamGenerateContent?alt=sse. It yields
// text, thinking and tool-call deltas as they arrive (Gemini sends each
// function call whole, so each comes as one [model.ToolCallDelta] with all
// its fields) and the complete response last, the same that
// [Model.Generate] returns. An error the API sends in place of a chunk is
// a *[model.StatusError]; a stream that ends before its last chunk is an
// error, never a truncated response. Other errors are those of
// [Model.Generate]. The stream is closed when the consumer stops early or
// ctx is done.
func (m *Model) GenerateStream(ctx context.Context, req *model.Request) iter.Seq2[model.Chunk, error] {
	return func(yield func(model.Chunk, error) bool) {
		resp, inPrompt, err := m.send(ctx, req, "streamGenerateContent?alt=sse")
		if err != nil {
			yield(model.Chunk{}, err)
			return
		}
		defer resp.Close()
		acc := m.newAccumulator(inPrompt && req.Output != nil)
		events := transport.NewSSEReader(resp.Body)
		for {
			ev, err := events.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				yield(model.Chunk{}, m.readError(ctx, err))
				return
			}
			var w wireResponse
			if err := json.Unmarshal([]byte(ev.Data), &w); err != nil {
				yield(model.Chunk{}, fmt.Errorf("gemini: %s: malformed stream event %.200q: %w", m.name, ev.Data, err))
				return
			}
			if len(w.Error) > 0 {
				yield(model.Chunk{}, m.eventError(&w, []byte(ev.Data)))
				return
			}
			if !acc.add(&w, func(d *model.Delta) bool { return yield(model.Chunk{Delta: d}, nil) }) {
				return
			}
		}
		r, err := acc.response(true)
		if err != nil {
			yield(model.Chunk{}, err)
			return
		}
		yield(model.Chunk{Response: r}, nil)
	}
}

// send encodes req and posts it to the model's method. When the API
// refuses an output schema together with function calling, it sends the
// request again with the schema in the system instruction, and does so
// from then on; inPrompt reports that the request it answers put the
// schema there.
func (m *Model) send(ctx context.Context, req *model.Request, method string) (resp *transport.Response, inPrompt bool, err error) {
	for {
		inPrompt = req.Output != nil && len(req.Tools) > 0 && m.jsonInPrompt.Load()
		body, err := m.body(req, inPrompt)
		if err != nil {
			return nil, false, err
		}
		resp, err = m.do(ctx, method, body)
		if err == nil {
			return resp, inPrompt, nil
		}
		if inPrompt || req.Output == nil || len(req.Tools) == 0 || !jsonWithToolsRefused(err) {
			return nil, false, err
		}
		m.jsonInPrompt.Store(true)
	}
}

// jsonWithToolsRefused reports the API's refusal of a JSON response type
// in a request with function declarations: "Function calling with a
// response mime type: 'application/json' is unsupported".
func jsonWithToolsRefused(err error) bool {
	var se *model.StatusError
	if !errors.As(err, &se) || se.StatusCode != http.StatusBadRequest {
		return false
	}
	msg := strings.ToLower(se.Message)
	return strings.Contains(msg, "function calling") && strings.Contains(msg, "mime type")
}

// body encodes req as the JSON body of a generateContent request.
func (m *Model) body(req *model.Request, inPrompt bool) ([]byte, error) {
	w, err := m.request(req, inPrompt)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(w)
	if err != nil {
		return nil, fmt.Errorf("gemini: encode request: %w", err)
	}
	return b, nil
}

// readError is the error of a response body that could not be read.
func (m *client) readError(ctx context.Context, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		if errors.Is(ctxErr, context.DeadlineExceeded) {
			return fmt.Errorf("gemini: %s: %w: %w", m.name, model.ErrTimeout, ctxErr)
		}
		return fmt.Errorf("gemini: %s: %w", m.name, ctxErr)
	}
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		return fmt.Errorf("gemini: %s: %w: %w", m.name, model.ErrTimeout, err)
	}
	return fmt.Errorf("gemini: %s: read response: %w", m.name, err)
}

// eventError is the *model.StatusError of an error object sent in place of
// a response (in a stream, after the HTTP status).
func (m *Model) eventError(w *wireResponse, body []byte) error {
	var code struct {
		Error struct {
			Code int `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(body, &code)
	se := &model.StatusError{Provider: provider, StatusCode: code.Error.Code}
	if !decodeError(body, se) || se.Message == "" {
		se.Message = string(w.Error)
	}
	if se.StatusCode == 0 {
		se.StatusCode = http.StatusInternalServerError
	}
	return authError(se)
}

// decodeError reads Gemini's error object, {"error": {"code", "message",
// "status", "details"}}: the status as the error's type, the reason of its
// ErrorInfo detail (such as API_KEY_INVALID) as its code, and the delay of
// its RetryInfo detail (a 429's "retryDelay": "32s", which the API sends
// instead of a Retry-After header) as its RetryAfter.
func decodeError(body []byte, e *model.StatusError) bool {
	if !transport.DecodeError(body, e) {
		return false
	}
	var v struct {
		Error struct {
			Details []struct {
				Type       string `json:"@type"`
				Reason     string `json:"reason"`
				RetryDelay string `json:"retryDelay"`
			} `json:"details"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &v) != nil {
		var list []json.RawMessage
		if json.Unmarshal(body, &list) != nil || len(list) != 1 || json.Unmarshal(list[0], &v) != nil {
			return true
		}
	}
	for _, d := range v.Error.Details {
		switch {
		case strings.HasSuffix(d.Type, "google.rpc.ErrorInfo") && d.Reason != "":
			e.Code = d.Reason
		case strings.HasSuffix(d.Type, "google.rpc.RetryInfo") && e.RetryAfter == 0:
			if d, err := time.ParseDuration(d.RetryDelay); err == nil && d > 0 {
				e.RetryAfter = d
			}
		}
	}
	return true
}

// authError makes the API's answer to an invalid key, a 400 whose reason
// is API_KEY_INVALID, match [model.ErrAuthentication] as well as what its
// status says.
func authError(err error) error {
	var se *model.StatusError
	if errors.As(err, &se) && se.Code == "API_KEY_INVALID" && !errors.Is(err, model.ErrAuthentication) {
		return &keyError{se}
	}
	return err
}

// keyError is a *model.StatusError for an invalid API key.
type keyError struct{ *model.StatusError }

func (e *keyError) Unwrap() error { return e.StatusError }

// Is reports whether target is model.ErrAuthentication.
func (e *keyError) Is(target error) bool { return target == model.ErrAuthentication }
