package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/internal/transport"
)

// defaultBaseURL is OpenAI's API.
const defaultBaseURL = "https://api.openai.com/v1"

// missingConfig says what to set when there is neither an API key nor a
// base URL.
const missingConfig = "set OPENAI_API_KEY, or OPENAI_BASE_URL for an OpenAI-compatible server such as Ollama (http://127.0.0.1:11434/v1), " +
	"or AZURE_OPENAI_ENDPOINT and AZURE_OPENAI_API_KEY for Azure OpenAI"

// endpoint is what the models and the embedder of the package share: the
// transport, the headers of every request and the URLs of the API.
type endpoint struct {
	client *transport.Client
	header http.Header
	// model is the model's name as configured (Options.Model); wireModel
	// is what the requests' "model" field carries: the same, or the
	// deployment on Azure.
	model, wireModel string
	// base is the API's base URL without a trailing slash (not Azure).
	base string
	// azure is the resolved Azure configuration, or nil.
	azure *AzureOptions
	// unversioned is the base URL when its path does not end in /v1, for
	// the hint of a 404 or 405 (see withHint); else empty.
	unversioned string
	// completionTokens sends a chat completion's token limit as
	// max_completion_tokens instead of max_tokens: OpenAI's own API and
	// Azure's want it (their reasoning models reject max_tokens); other
	// servers reliably understand max_tokens.
	completionTokens bool
	// host is the host of the base URL; empty for Azure.
	host string
}

// newEndpoint resolves opts and the environment. It fails with an error
// matching [model.ErrNoModel] when opts names no model, or when there is
// nothing to call: neither an API key nor a base URL, or an Azure
// configuration without an endpoint or a key.
func newEndpoint(opts Options) (*endpoint, error) {
	if opts.Model == "" {
		return nil, fmt.Errorf("%w: openai: Options.Model is empty", model.ErrNoModel)
	}
	// Every request of the API posts JSON: the content type is set here
	// once rather than on each request.
	e := &endpoint{model: opts.Model, wireModel: opts.Model, header: http.Header{"Content-Type": {"application/json"}}}
	for k, v := range opts.Headers {
		e.header.Set(k, v)
	}
	if opts.Azure != nil {
		if err := e.resolveAzure(opts); err != nil {
			return nil, err
		}
	} else {
		if opts.APIKey == "" {
			opts.APIKey = os.Getenv("OPENAI_API_KEY")
		}
		if opts.BaseURL == "" {
			opts.BaseURL = os.Getenv("OPENAI_BASE_URL")
		}
		if opts.APIKey == "" && opts.BaseURL == "" {
			return nil, fmt.Errorf("%w: openai: %s", model.ErrNoModel, missingConfig)
		}
		if opts.BaseURL == "" {
			opts.BaseURL = defaultBaseURL
		}
		u, err := parseBase(opts.BaseURL)
		if err != nil {
			return nil, err
		}
		e.base = strings.TrimRight(opts.BaseURL, "/")
		e.host = u.Host
		e.completionTokens = u.Host == "api.openai.com"
		if !strings.HasSuffix(strings.TrimRight(u.Path, "/"), "/v1") {
			e.unversioned = u.Redacted()
		}
		if opts.APIKey != "" {
			e.header.Set("Authorization", "Bearer "+opts.APIKey)
		}
	}
	e.client = transport.New(transport.Options{
		Provider:   "openai",
		HTTPClient: opts.HTTPClient,
		MaxRetries: opts.MaxRetries,
		Timeout:    opts.Timeout,
		Logger:     opts.Logger,
	})
	return e, nil
}

// parseBase checks a base URL.
func parseBase(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("openai: invalid base URL %q: want http(s)://host[:port]/path", s)
	}
	return u, nil
}

// url returns the URL of an operation of the API: "chat/completions",
// "embeddings" or "responses".
func (e *endpoint) url(op string) string {
	if e.azure != nil {
		return e.azure.url(op)
	}
	return e.base + "/" + op
}

// do posts body to the URL of op. An error response is a
// *[model.StatusError], with the hint of [endpoint.withHint].
func (e *endpoint) do(ctx context.Context, url string, body []byte) (*transport.Response, error) {
	resp, err := e.client.Do(ctx, &transport.Request{URL: url, Header: e.header, Body: body})
	if err != nil {
		return nil, e.withHint(err)
	}
	return resp, nil
}

// withHint adds to a 404 or 405 from a base URL whose path does not end in
// /v1 the question whether /v1 is missing: the server has no such route,
// which is what a server that serves the API under /v1 answers then.
func (e *endpoint) withHint(err error) error {
	var se *model.StatusError
	if e.unversioned != "" && errors.As(err, &se) &&
		(se.StatusCode == http.StatusNotFound || se.StatusCode == http.StatusMethodNotAllowed) {
		se.Message += fmt.Sprintf(" (is the base URL %s missing /v1?)", e.unversioned)
	}
	return err
}

// readError is the error of reading a response's body: ctx's error when it
// is done, an error matching [model.ErrTimeout] when the attempt ran out of
// time, else err.
func (e *endpoint) readError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		cause := context.Cause(ctx)
		if errors.Is(cause, context.DeadlineExceeded) {
			return fmt.Errorf("openai: %s: %w: %w", e.model, model.ErrTimeout, cause)
		}
		return fmt.Errorf("openai: %s: %w", e.model, cause)
	}
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		return fmt.Errorf("openai: %s: %w: %w", e.model, model.ErrTimeout, err)
	}
	return fmt.Errorf("openai: %s: reading the response: %w", e.model, err)
}

// postJSON posts body to url and decodes the JSON answer into out; what
// names the answer ("a JSON chat completion") in the error of one that is
// not JSON.
func (e *endpoint) postJSON(ctx context.Context, url string, body []byte, out any, what string) error {
	resp, err := e.do(ctx, url, body)
	if err != nil {
		return err
	}
	ct := resp.Header.Get("Content-Type")
	data, err := e.readBody(ctx, resp)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("openai: %s: the answer (content type %q) is not %s: %w", e.model, ct, what, err)
	}
	return nil
}

// readBody reads the whole body of resp and closes it.
func (e *endpoint) readBody(ctx context.Context, resp *transport.Response) ([]byte, error) {
	defer resp.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, e.readError(ctx, err)
	}
	return data, nil
}

// errStreamCut is the error of a stream that ends before its response
// does: the connection closed early, or the server stopped sending.
func (e *endpoint) errStreamCut() error {
	return fmt.Errorf("openai: %s: the stream ended before the response was complete: %w", e.model, io.ErrUnexpectedEOF)
}

// streamError returns the *model.StatusError of an error object that came
// inside a successful (HTTP 200) stream: an "error" event of the Responses
// API, a failed response, or the error chunk some compatible servers send
// in a chat completion stream. There is no HTTP status to go by, so one is
// inferred from the error's code (see statusOf).
func streamError(typ, code, message string) *model.StatusError {
	return &model.StatusError{Provider: "openai", StatusCode: statusOf(code, typ), Type: typ, Code: code, Message: message}
}

// statusOf returns the HTTP status that stands for an error sent inside a
// stream, from its code or type: a numeric code that is an HTTP status is
// taken as it is (OpenRouter's), rate limits are 429, the codes of a
// refused request ("context_length_exceeded", "invalid_*") 400, and
// anything else a server error, 500.
func statusOf(code, typ string) int {
	if status, err := strconv.Atoi(code); err == nil && status >= 400 && status <= 599 {
		return status
	}
	s := strings.ToLower(code + " " + typ)
	switch {
	case strings.Contains(s, "rate_limit"):
		return http.StatusTooManyRequests
	case strings.Contains(s, "context_length_exceeded"), strings.Contains(s, "invalid"):
		return http.StatusBadRequest
	case strings.Contains(s, "authentication"), strings.Contains(s, "api_key"):
		return http.StatusUnauthorized
	default:
		return http.StatusInternalServerError
	}
}
