package openai_test

import (
	"errors"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/calf-go/calf/model/cassette"
)

// The recorded provider traffic lives next to the repository, in
// ../shared/recordings from its root; it is other projects' data, read
// where it is and never copied here. Tests skip when it is absent.
const recordings = "../../../shared/recordings"

// exchange is one recorded request and its response.
type exchange struct {
	method, url string
	header      http.Header
	body        []byte // the request's
	status      int
	respHeader  http.Header
	respBody    []byte
}

// recording returns the exchanges of the file name under the recordings'
// provider directory, skipping the test when the recordings are absent.
func recording(t *testing.T, provider, name string) []exchange {
	t.Helper()
	path := filepath.Join(recordings, provider, name)
	xs, err := cassette.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		t.Skipf("no recordings at %s", recordings)
	}
	if err != nil {
		t.Fatal(err)
	}
	out := make([]exchange, len(xs))
	for i, x := range xs {
		out[i] = exchange{
			method: x.Request.Method, url: x.Request.URL.String(), header: x.Request.Header, body: x.RequestBody,
			status: x.Response.StatusCode, respHeader: x.Response.Header, respBody: x.ResponseBody,
		}
	}
	return out
}

// sentRequest is a request as the replay server received it.
type sentRequest struct {
	method string
	url    *url.URL // path and query
	host   string   // the host the client meant (the recorded one)
	header http.Header
	body   []byte
}

// replayer serves recorded exchanges in order, each to a request with the
// recorded method and path, and keeps the requests it received.
type replayer struct {
	t   *testing.T
	srv *httptest.Server
	mu  sync.Mutex
	ex  []exchange
	got []sentRequest
}

// replay starts a server that answers with ex, in order.
func replay(t *testing.T, ex []exchange) *replayer {
	t.Helper()
	r := &replayer{t: t, ex: ex}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *replayer) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	n := len(r.got)
	r.got = append(r.got, sentRequest{method: req.Method, url: req.URL, host: req.Header.Get("X-Recorded-Host"), header: req.Header.Clone(), body: body})
	r.mu.Unlock()
	if n >= len(r.ex) {
		r.t.Errorf("request %d (%s %s): the recording has only %d exchanges", n+1, req.Method, req.URL.Path, len(r.ex))
		http.Error(w, "no more recorded exchanges", http.StatusTeapot)
		return
	}
	e := r.ex[n]
	want, _ := url.Parse(e.url)
	if req.Method != e.method || req.URL.Path != want.Path {
		r.t.Errorf("request %d: %s %s, the recording has %s %s", n+1, req.Method, req.URL.Path, e.method, want.Path)
	}
	for k, v := range e.respHeader {
		if k == "Content-Length" || k == "Transfer-Encoding" {
			continue
		}
		w.Header()[k] = v
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(e.respBody)))
	w.WriteHeader(e.status)
	_, _ = w.Write(e.respBody)
}

// requests returns the requests received so far.
func (r *replayer) requests() []sentRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]sentRequest(nil), r.got...)
}

// client returns an HTTP client that sends every request to the replay
// server instead of the host it names, so that the adapter can be
// configured with the recorded base URL (its host matters: OpenAI's own
// API gets max_completion_tokens).
func (r *replayer) client() *http.Client {
	target, _ := url.Parse(r.srv.URL)
	return &http.Client{Transport: redirect{target: target}}
}

// redirect is a transport that sends requests to target, telling it the
// host they were meant for.
type redirect struct{ target *url.URL }

func (d redirect) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("X-Recorded-Host", req.URL.Host)
	req.URL.Scheme, req.URL.Host, req.Host = d.target.Scheme, d.target.Host, ""
	return http.DefaultTransport.RoundTrip(req)
}

// baseOf returns the base URL of a recorded request to op, such as
// "https://api.openai.com/v1" for ".../v1/chat/completions".
func baseOf(t *testing.T, rawURL, op string) string {
	t.Helper()
	base, ok := strings.CutSuffix(rawURL, "/"+op)
	if !ok {
		t.Fatalf("recorded URL %s is not one of %s", rawURL, op)
	}
	return base
}
