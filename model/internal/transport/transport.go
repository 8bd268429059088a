package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/calf-go/calf/model"
)

// Defaults of [Options].
const (
	DefaultMaxRetries = 2
	DefaultTimeout    = 2 * time.Minute
	// maxRetryAfter bounds how long a retry waits for a server that asks
	// for more: past it, the error is returned with its RetryAfter.
	maxRetryAfter = time.Minute
	// maxErrorBody bounds what is read of an error response.
	maxErrorBody = 64 << 10
	// maxQuoted bounds the part of a body that is not an error object
	// quoted in an error's message.
	maxQuoted = 512
)

// Options configures a [Client].
type Options struct {
	// Provider names the provider in errors and log records, such as
	// "anthropic".
	Provider string
	// HTTPClient sends the requests. Default: a shared client that keeps up
	// to 1,024 idle connections per host.
	HTTPClient *http.Client
	// MaxRetries is how many times a request is sent again; 0 means
	// DefaultMaxRetries, a negative value none.
	MaxRetries int
	// Timeout bounds each attempt; for a streamed response it bounds the
	// whole stream. An attempt that times out is not retried. 0 means
	// DefaultTimeout, a negative value no limit but the context's.
	Timeout time.Duration
	// Logger receives a debug record per attempt. Default: none.
	Logger *slog.Logger
	// DecodeError reads the provider's error object from an error
	// response's body into e (its Type, Code and Message); it reports
	// false when the body is not one. Default: the {"error": {"type",
	// "code", "message"}} shape OpenAI, Anthropic and Gemini share, with
	// Gemini's "status" as the type.
	DecodeError func(body []byte, e *model.StatusError) bool
	// Backoff returns the wait before retry n (1 for the first) when the
	// server did not say. Default: 500 ms doubling up to 8 s, with jitter.
	Backoff func(n int) time.Duration
}

// Client sends the requests of one adapter. It is safe for concurrent
// use.
type Client struct {
	o Options
}

// DefaultHTTPClient keeps enough idle connections per host for as many
// concurrent runs against one server as a worker works on by default
// (1,024); net/http's default keeps two, so a busy worker would open and
// close a connection for most requests.
var DefaultHTTPClient = &http.Client{Transport: func() http.RoundTripper {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 2048
	t.MaxIdleConnsPerHost = 1024
	return t
}()}

// New returns a client configured by o.
func New(o Options) *Client {
	if o.HTTPClient == nil {
		o.HTTPClient = DefaultHTTPClient
	}
	switch {
	case o.MaxRetries == 0:
		o.MaxRetries = DefaultMaxRetries
	case o.MaxRetries < 0:
		o.MaxRetries = 0
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.DecodeError == nil {
		o.DecodeError = DecodeError
	}
	if o.Backoff == nil {
		o.Backoff = backoff
	}
	return &Client{o: o}
}

// Request is one API call.
type Request struct {
	// Method is the HTTP method; default POST.
	Method string
	// URL is the full URL of the call.
	URL string
	// Header holds the request's headers (credentials among them).
	Header http.Header
	// Body is the request's body, sent again as it is on a retry.
	Body []byte
}

// Response is a successful (2xx) response whose body is still to be read.
// Close it: closing ends the attempt's timeout too.
type Response struct {
	*http.Response
	cancel context.CancelFunc
}

// Close closes the body and releases the attempt's timeout.
func (r *Response) Close() error {
	err := r.Body.Close()
	r.cancel()
	return err
}

// Do sends r until a 2xx response, retrying connection errors and
// retryable statuses (see [model.StatusError.Retryable]) after a backoff,
// at most Options.MaxRetries times. The response's body is not read: the
// caller reads it (a stream, or JSON) and closes the response; nothing is
// retried once Do has returned. Errors: an error response is a
// *[model.StatusError]; running out of time matches [model.ErrTimeout]
// (and context.DeadlineExceeded when that was the cause); a cancelled ctx
// gives ctx's error.
func (c *Client) Do(ctx context.Context, r *Request) (*Response, error) {
	method := r.Method
	if method == "" {
		method = http.MethodPost
	}
	for attempt := 0; ; attempt++ {
		actx, cancel := ctx, context.CancelFunc(func() {})
		if c.o.Timeout > 0 && !endsWithin(ctx, c.o.Timeout) {
			actx, cancel = context.WithTimeout(ctx, c.o.Timeout)
		}
		resp, err := c.send(actx, method, r, attempt)
		if err == nil && resp.StatusCode/100 == 2 {
			return &Response{Response: resp, cancel: cancel}, nil
		}
		var wait time.Duration
		retry := attempt < c.o.MaxRetries
		if err != nil {
			timedOut := actx.Err() != nil || isTimeout(err)
			cancel()
			if ctx.Err() != nil {
				return nil, c.ctxError(ctx)
			}
			if timedOut {
				return nil, fmt.Errorf("%s: %w: %w", c.o.Provider, model.ErrTimeout, err)
			}
			err = fmt.Errorf("%s: %w", c.o.Provider, err)
		} else {
			se := c.statusError(resp)
			cancel()
			err = se
			retry = retry && se.Retryable()
			switch resp.Header.Get("X-Should-Retry") {
			case "true":
				retry = attempt < c.o.MaxRetries
			case "false":
				retry = false
			}
			wait = se.RetryAfter
			if wait > maxRetryAfter {
				retry = false
			}
		}
		if !retry {
			return nil, err
		}
		if wait <= 0 {
			wait = c.o.Backoff(attempt + 1)
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, c.ctxError(ctx)
		}
	}
}

// endsWithin reports whether ctx has a deadline at most d from now, which
// then bounds an attempt before a timeout of d would: the attempt goes
// without a context of its own, which costs a timer and a registration
// with ctx on every request (an agent's model calls have such a deadline).
func endsWithin(ctx context.Context, d time.Duration) bool {
	deadline, ok := ctx.Deadline()
	return ok && time.Until(deadline) <= d
}

// send makes one attempt.
func (c *Client) send(ctx context.Context, method string, r *Request, attempt int) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, r.URL, bytes.NewReader(r.Body))
	if err != nil {
		return nil, err
	}
	if r.Body == nil {
		req.Body, req.ContentLength = http.NoBody, 0
	}
	for k, v := range r.Header {
		req.Header[k] = v
	}
	if req.Header.Get("Content-Type") == "" && r.Body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	var start time.Time
	if c.o.Logger != nil {
		start = time.Now()
	}
	resp, err := c.o.HTTPClient.Do(req)
	if c.o.Logger != nil {
		attrs := []slog.Attr{
			slog.String("method", method),
			slog.String("path", req.URL.Path),
			slog.Int("attempt", attempt+1),
			slog.Duration("duration", time.Since(start)),
		}
		if err != nil {
			attrs = append(attrs, slog.String("error", err.Error()))
		} else {
			attrs = append(attrs, slog.Int("status", resp.StatusCode))
		}
		c.o.Logger.LogAttrs(ctx, slog.LevelDebug, c.o.Provider+": http attempt", attrs...)
	}
	return resp, err
}

// ctxError is the error of a call whose ctx ended.
func (c *Client) ctxError(ctx context.Context) error {
	err := context.Cause(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %w: %w", c.o.Provider, model.ErrTimeout, err)
	}
	return fmt.Errorf("%s: %w", c.o.Provider, err)
}

// isTimeout reports a network timeout.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// statusError reads the error response resp, and closes its body.
func (c *Client) statusError(resp *http.Response) *model.StatusError {
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	e := &model.StatusError{Provider: c.o.Provider, StatusCode: resp.StatusCode, RetryAfter: RetryAfter(resp.Header),
		RequestID: requestID(resp.Header)}
	if !c.o.DecodeError(body, e) || e.Message == "" {
		e.Message = quote(body, resp.StatusCode)
	}
	return e
}

// StatusError reads an error response the caller got outside Do (an
// error event in a stream carries the same object), closing its body.
func (c *Client) StatusError(resp *http.Response) *model.StatusError { return c.statusError(resp) }

// requestID returns the provider's id of the request.
func requestID(h http.Header) string {
	for _, k := range []string{"X-Request-Id", "Request-Id", "X-Goog-Request-Id", "Cf-Ray"} {
		if v := h.Get(k); v != "" {
			return v
		}
	}
	return ""
}

// quote returns the text of an error body that is not an error object.
func quote(body []byte, status int) string {
	s := strings.TrimSpace(string(bytes.ToValidUTF8(body, nil)))
	if s == "" {
		return http.StatusText(status)
	}
	if len(s) > maxQuoted {
		s = s[:maxQuoted] + "..."
	}
	return s
}

// RetryAfter returns how long the headers h ask to wait: retry-after-ms,
// or Retry-After in seconds or as an HTTP date; zero when they do not say.
func RetryAfter(h http.Header) time.Duration {
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := h.Get("Retry-After")
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s <= 0 {
			return 0
		}
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := time.Until(t); d > 0 {
			return d
		}
	}
	return 0
}

// backoff is the default wait before retry n: 500 ms doubling up to 8 s,
// less up to a quarter at random, so that clients refused together do not
// come back together.
func backoff(n int) time.Duration {
	d := 500 * time.Millisecond << min(n-1, 4)
	return d - time.Duration(rand.Int64N(int64(d/4)+1))
}
