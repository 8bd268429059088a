package openai_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
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
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		t.Skipf("no recordings at %s", recordings)
	}
	if err != nil {
		t.Fatal(err)
	}
	ex, err := parseHTTPRR(data)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return ex
}

// parseHTTPRR reads an "httprr trace v1" file: its header line, then for
// each exchange an "N M" line, N bytes of request and M bytes of response.
func parseHTTPRR(data []byte) ([]exchange, error) {
	header, rest, ok := bytes.Cut(data, []byte("\n"))
	if !ok || string(header) != "httprr trace v1" {
		return nil, fmt.Errorf("not an httprr trace: %q", header)
	}
	var out []exchange
	for len(rest) > 0 {
		line, after, ok := bytes.Cut(rest, []byte("\n"))
		if !ok {
			return nil, fmt.Errorf("exchange %d: no size line", len(out)+1)
		}
		var n, m int
		if _, err := fmt.Sscanf(string(line), "%d %d", &n, &m); err != nil || n+m > len(after) {
			return nil, fmt.Errorf("exchange %d: bad size line %q", len(out)+1, line)
		}
		rawReq, rawResp := after[:n], after[n:n+m]
		rest = after[n+m:]
		req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(rawReq)))
		if err != nil {
			return nil, fmt.Errorf("exchange %d: request: %w", len(out)+1, err)
		}
		reqBody, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, fmt.Errorf("exchange %d: request body: %w", len(out)+1, err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(rawResp)), req)
		if err != nil {
			return nil, fmt.Errorf("exchange %d: response: %w", len(out)+1, err)
		}
		// ReadResponse de-chunks a chunked body.
		respBody, err := io.ReadAll(resp.Body)
		if err != nil {
			return nil, fmt.Errorf("exchange %d: response body: %w", len(out)+1, err)
		}
		out = append(out, exchange{
			method: req.Method, url: req.URL.String(), header: req.Header, body: reqBody,
			status: resp.StatusCode, respHeader: resp.Header, respBody: respBody,
		})
	}
	return out, nil
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
