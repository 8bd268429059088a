package transport

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/calf-go/calf/model"
)

// server answers the n-th request (from 1) with answer(n).
func server(t *testing.T, answer func(n int, w http.ResponseWriter, r *http.Request)) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		answer(int(n.Add(1)), w, r)
	}))
	t.Cleanup(s.Close)
	return s, &n
}

func fast(int) time.Duration { return time.Millisecond }

func call(t *testing.T, c *Client, url string) (string, error) {
	t.Helper()
	resp, err := c.Do(t.Context(), &Request{URL: url, Header: http.Header{"X-Api-Key": {"k"}}, Body: []byte(`{"a":1}`)})
	if err != nil {
		return "", err
	}
	defer resp.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func TestRetries(t *testing.T) {
	for _, tc := range []struct {
		name     string
		answer   func(n int, w http.ResponseWriter)
		retries  int
		wantBody string
		wantN    int32
		wantErr  error
	}{
		{"429 with Retry-After then success", func(n int, w http.ResponseWriter) {
			if n == 1 {
				w.Header().Set("Retry-After", "0.05")
				w.WriteHeader(429)
				_, _ = io.WriteString(w, `{"error":{"type":"rate_limit_error","message":"slow down"}}`)
				return
			}
			_, _ = io.WriteString(w, "ok")
		}, 2, "ok", 2, nil},
		{"500 twice then success", func(n int, w http.ResponseWriter) {
			if n <= 2 {
				w.WriteHeader(500)
				return
			}
			_, _ = io.WriteString(w, "ok")
		}, 2, "ok", 3, nil},
		{"503 past the retries", func(n int, w http.ResponseWriter) { w.WriteHeader(503) }, 2, "", 3, model.ErrOverloaded},
		{"400 is not retried", func(n int, w http.ResponseWriter) {
			w.WriteHeader(400)
			_, _ = io.WriteString(w, `{"error":{"type":"invalid_request_error","message":"prompt is too long"}}`)
		}, 2, "", 1, model.ErrContextTooLong},
		{"401 is not retried", func(n int, w http.ResponseWriter) { w.WriteHeader(401) }, 2, "", 1, model.ErrAuthentication},
		{"x-should-retry false", func(n int, w http.ResponseWriter) {
			w.Header().Set("X-Should-Retry", "false")
			w.WriteHeader(503)
		}, 2, "", 1, model.ErrOverloaded},
		{"x-should-retry true on a 400", func(n int, w http.ResponseWriter) {
			if n == 1 {
				w.Header().Set("X-Should-Retry", "true")
				w.WriteHeader(400)
				return
			}
			_, _ = io.WriteString(w, "ok")
		}, 2, "ok", 2, nil},
		{"no retries", func(n int, w http.ResponseWriter) { w.WriteHeader(429) }, -1, "", 1, model.ErrRateLimited},
		{"Retry-After too long is not waited for", func(n int, w http.ResponseWriter) {
			w.Header().Set("Retry-After", "3600")
			w.WriteHeader(429)
		}, 2, "", 1, model.ErrRateLimited},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var bodies []string
			s, n := server(t, func(n int, w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				bodies = append(bodies, string(b)+" "+r.Header.Get("X-Api-Key")+" "+r.Header.Get("Content-Type"))
				tc.answer(n, w)
			})
			c := New(Options{Provider: "test", MaxRetries: tc.retries, Backoff: fast})
			body, err := call(t, c, s.URL)
			if tc.wantErr != nil {
				var se *model.StatusError
				if !errors.Is(err, tc.wantErr) || !errors.As(err, &se) {
					t.Fatalf("err = %v; want a *model.StatusError matching %v", err, tc.wantErr)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if body != tc.wantBody || n.Load() != tc.wantN {
				t.Errorf("body %q after %d requests; want %q after %d", body, n.Load(), tc.wantBody, tc.wantN)
			}
			for _, b := range bodies {
				if b != `{"a":1} k application/json` {
					t.Errorf("a request carried %q; want the same body and headers on every attempt", b)
				}
			}
		})
	}
}

func TestStatusErrorFields(t *testing.T) {
	s, _ := server(t, func(n int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Request-Id", "req_123")
		w.Header().Set("Retry-After-Ms", "1500")
		w.WriteHeader(529)
		_, _ = io.WriteString(w, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)
	})
	_, err := call(t, New(Options{Provider: "anthropic", MaxRetries: -1}), s.URL)
	var se *model.StatusError
	if !errors.As(err, &se) {
		t.Fatalf("err = %v", err)
	}
	want := &model.StatusError{Provider: "anthropic", StatusCode: 529, Type: "overloaded_error", Message: "Overloaded", RequestID: "req_123", RetryAfter: 1500 * time.Millisecond}
	if diff := cmp.Diff(want, se); diff != "" {
		t.Errorf("error (-want +got):\n%s", diff)
	}
}

func TestDecodeError(t *testing.T) {
	for _, tc := range []struct {
		body string
		want model.StatusError
		ok   bool
	}{
		{`{"error":{"message":"Incorrect API key","type":"invalid_request_error","code":"invalid_api_key"}}`,
			model.StatusError{Type: "invalid_request_error", Code: "invalid_api_key", Message: "Incorrect API key"}, true},
		{`{"error":{"code":400,"message":"API key not valid.","status":"INVALID_ARGUMENT"}}`,
			model.StatusError{Type: "INVALID_ARGUMENT", Code: "400", Message: "API key not valid."}, true},
		{`[{"error":{"code":429,"message":"Quota","status":"RESOURCE_EXHAUSTED"}}]`,
			model.StatusError{Type: "RESOURCE_EXHAUSTED", Code: "429", Message: "Quota"}, true},
		{`{"error":"model not found"}`, model.StatusError{Message: "model not found"}, true},
		{`{"message":"bad"}`, model.StatusError{Message: "bad"}, true},
		{`<html>Bad Gateway</html>`, model.StatusError{}, false},
	} {
		var got model.StatusError
		ok := DecodeError([]byte(tc.body), &got)
		if ok != tc.ok || got != tc.want {
			t.Errorf("DecodeError(%s) = %+v, %v; want %+v, %v", tc.body, got, ok, tc.want, tc.ok)
		}
	}
}

func TestTimeoutIsNotRetried(t *testing.T) {
	s, n := server(t, func(n int, w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(2 * time.Second):
		}
	})
	c := New(Options{Provider: "test", Timeout: 50 * time.Millisecond, Backoff: fast})
	_, err := call(t, c, s.URL)
	if !errors.Is(err, model.ErrTimeout) {
		t.Fatalf("err = %v; want model.ErrTimeout", err)
	}
	if n.Load() != 1 {
		t.Errorf("%d attempts; a timed-out attempt must not be retried", n.Load())
	}
}

// A caller's deadline sooner than the attempt's timeout bounds the
// attempt in its place (no context of the attempt's own is made): the
// error is a timeout all the same, caused by the caller's deadline, and
// the attempt is not retried. A later deadline leaves the timeout to do it.
func TestCallersDeadline(t *testing.T) {
	s, n := server(t, func(n int, w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(2 * time.Second):
		}
	})
	for _, tt := range []struct {
		name              string
		deadline, timeout time.Duration
	}{
		{"sooner", 50 * time.Millisecond, time.Minute},
		{"later", time.Minute, 50 * time.Millisecond},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n.Store(0)
			c := New(Options{Provider: "test", Timeout: tt.timeout, Backoff: fast})
			ctx, cancel := context.WithTimeout(t.Context(), tt.deadline)
			defer cancel()
			start := time.Now()
			resp, err := c.Do(ctx, &Request{URL: s.URL, Body: []byte("{}")})
			if err == nil {
				resp.Close()
			}
			if !errors.Is(err, model.ErrTimeout) {
				t.Fatalf("err = %v; want model.ErrTimeout", err)
			}
			if tt.name == "sooner" && !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("err = %v; want the caller's deadline as its cause", err)
			}
			if d := time.Since(start); d > time.Second {
				t.Errorf("took %v", d)
			}
			if n.Load() != 1 {
				t.Errorf("%d attempts, want 1", n.Load())
			}
		})
	}
}

func TestCancelledWhileWaiting(t *testing.T) {
	s, _ := server(t, func(n int, w http.ResponseWriter, r *http.Request) { w.WriteHeader(503) })
	c := New(Options{Provider: "test", Backoff: func(int) time.Duration { return time.Hour }})
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(50*time.Millisecond, cancel)
	_, err := c.Do(ctx, &Request{URL: s.URL})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v; want context.Canceled", err)
	}
}

func TestConnectionErrorRetried(t *testing.T) {
	s, n := server(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			// Drop the connection without an answer.
			hj, _ := w.(http.Hijacker)
			conn, _, _ := hj.Hijack()
			_ = conn.Close()
			return
		}
		_, _ = io.WriteString(w, "ok")
	})
	body, err := call(t, New(Options{Provider: "test", Backoff: fast}), s.URL)
	if err != nil || body != "ok" || n.Load() != 2 {
		t.Errorf("body %q, err %v after %d requests; want ok after 2", body, err, n.Load())
	}
}

func TestRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		h    http.Header
		want time.Duration
	}{
		{http.Header{"Retry-After": {"2"}}, 2 * time.Second},
		{http.Header{"Retry-After-Ms": {"250"}, "Retry-After": {"2"}}, 250 * time.Millisecond},
		{http.Header{"Retry-After": {"soon"}}, 0},
		{http.Header{}, 0},
	} {
		if got := RetryAfter(tc.h); got != tc.want {
			t.Errorf("RetryAfter(%v) = %v, want %v", tc.h, got, tc.want)
		}
	}
	h := http.Header{"Retry-After": {time.Now().Add(30 * time.Second).UTC().Format(http.TimeFormat)}}
	if got := RetryAfter(h); got < 25*time.Second || got > 31*time.Second {
		t.Errorf("RetryAfter(an HTTP date 30 s ahead) = %v", got)
	}
}

func TestBackoffGrows(t *testing.T) {
	for n := 1; n <= 6; n++ {
		max := 500 * time.Millisecond << min(n-1, 4)
		if d := backoff(n); d > max || d < max*3/4 {
			t.Errorf("backoff(%d) = %v, want within [%v, %v]", n, d, max*3/4, max)
		}
	}
}

func TestNoBodyIsNotJSON(t *testing.T) {
	s, _ := server(t, func(n int, w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.Method+" "+r.Header.Get("Content-Type"))
	})
	resp, err := New(Options{Provider: "test"}).Do(t.Context(), &Request{Method: http.MethodGet, URL: s.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Close()
	b, _ := io.ReadAll(resp.Body)
	if got := strings.TrimSpace(string(b)); got != "GET" {
		t.Errorf("a GET without a body was sent as %q", got)
	}
}
