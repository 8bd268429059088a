package cassette

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
)

// EnvRecord is the environment variable that turns recording on: when it
// is set to a non-empty value, cassettes in [Auto] mode record.
//
//	CALF_RECORD=1 go test ./...
const EnvRecord = "CALF_RECORD"

// Recording reports whether [EnvRecord] asks cassettes in [Auto] mode to
// record.
func Recording() bool {
	return os.Getenv(EnvRecord) != ""
}

// Mode says whether a cassette records or replays.
type Mode int

const (
	// Auto records when [Recording] says so, and replays otherwise.
	Auto Mode = iota
	// Replay answers requests from the cassette's file and never uses
	// the network.
	Replay
	// Record sends requests on and writes what was exchanged to the
	// cassette's file when it is closed.
	Record
)

// String returns "auto", "replay" or "record".
func (m Mode) String() string {
	switch m {
	case Auto:
		return "auto"
	case Replay:
		return "replay"
	case Record:
		return "record"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// Options configures a [Cassette]. A nil *Options means the defaults.
type Options struct {
	// Mode says whether to record or replay. Default: Auto, which
	// records when CALF_RECORD is set to a non-empty value.
	Mode Mode
	// Transport sends the requests while recording. Default:
	// http.DefaultTransport. It is not used while replaying.
	Transport http.RoundTripper
	// Scrub edits a copy of each request after the built-in scrubbing
	// of credentials. While recording it runs before the request is
	// written, so that what it removes never reaches the file; while
	// replaying it runs before the request is matched, so that the
	// request is compared with what was recorded. It may change the
	// headers, the URL and the body (read req.Body and set a new one;
	// the length is taken from what it holds). The request sent to the
	// server is never changed. Default: none.
	Scrub func(req *http.Request) error
	// ScrubResponse edits a copy of each response after the built-in
	// scrubbing, before it is written while recording. It may change
	// the status, the headers and the body, as Scrub does for
	// requests. The response given to the caller is never changed.
	// Default: none.
	ScrubResponse func(resp *http.Response) error
	// Match compares a recorded request's body with the body of a
	// request being replayed, both after scrubbing; the method, the URL
	// path and the query must be equal besides. Default: EqualBody.
	Match func(recorded, sent []byte) bool
}

// ErrClosed is returned by a cassette's RoundTrip after Close.
var ErrClosed = errors.New("cassette: closed")

// A Cassette is an [http.RoundTripper] that records a provider's HTTP
// traffic to a file, or replays it from that file. A Cassette is safe for
// concurrent use.
type Cassette struct {
	path      string
	mode      Mode // Record or Replay
	transport http.RoundTripper
	scrub     func(*http.Request) error
	scrubResp func(*http.Response) error
	match     func(recorded, sent []byte) bool
	hint      string // how to record, for errors

	mu        sync.Mutex
	closed    bool
	exchanges []*exchange  // replaying: the file's
	used      []bool       // replaying: which exchanges have answered
	recorded  bytes.Buffer // recording: the exchanges so far
}

var _ http.RoundTripper = (*Cassette)(nil)

// Open opens the cassette file at path. When replaying, the file is read
// at once and must exist; when recording, it is created or replaced on
// [Cassette.Close], with the directories it needs.
func Open(path string, opts *Options) (*Cassette, error) {
	return open(path, opts, EnvRecord+"=1 go test")
}

func open(path string, opts *Options, hint string) (*Cassette, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	c := &Cassette{
		path:      path,
		mode:      o.Mode,
		transport: o.Transport,
		scrub:     o.Scrub,
		scrubResp: o.ScrubResponse,
		match:     o.Match,
		hint:      hint,
	}
	if c.mode == Auto {
		c.mode = Replay
		if Recording() {
			c.mode = Record
		}
	}
	if c.transport == nil {
		c.transport = http.DefaultTransport
	}
	if c.match == nil {
		c.match = EqualBody
	}
	switch c.mode {
	case Record:
		return c, nil
	case Replay:
	default:
		return nil, fmt.Errorf("cassette: unknown mode %v", c.mode)
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("cassette: %s: %w; record it with: %s", path, fs.ErrNotExist, hint)
	}
	if err != nil {
		return nil, fmt.Errorf("cassette: %w", err)
	}
	c.exchanges, err = readTrace(data)
	if err != nil {
		return nil, fmt.Errorf("cassette: %s: %w", path, err)
	}
	c.used = make([]bool, len(c.exchanges))
	return c, nil
}

// ForTest opens a cassette for a test and returns an HTTP client that
// goes through it. The cassette is closed when the test and its subtests
// finish, which writes the file when recording, whether the test passed
// or not. Errors fail the test; a missing file in replay mode says how to
// record it.
//
// An empty path means testdata/NAME.httprr, NAME being the test's name
// with each "/" replaced by "-".
func ForTest(t testing.TB, path string, opts *Options) *http.Client {
	t.Helper()
	if path == "" {
		path = filepath.Join("testdata", fileName(t.Name())+".httprr")
	}
	c, err := open(path, opts, EnvRecord+"=1 go test -run '"+runPattern(t.Name())+"'")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	return c.Client()
}

// fileName turns a test's name into a file name.
func fileName(test string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == '/':
			return '-'
		case r == '-' || r == '_' || r == '.',
			'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9':
			return r
		}
		return '_'
	}, test)
}

// runPattern is the -run pattern that selects exactly the test named.
func runPattern(test string) string {
	parts := strings.Split(test, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.Join(parts, "/")
}

// Mode returns Record or Replay, what the cassette does.
func (c *Cassette) Mode() Mode { return c.mode }

// Client returns an HTTP client whose requests go through the cassette.
func (c *Cassette) Client() *http.Client {
	return &http.Client{Transport: c}
}

// RoundTrip records or replays one exchange.
//
// Recording, it sends req with the cassette's transport, reads the whole
// response, keeps a scrubbed copy of both and returns the response.
//
// Replaying, it answers with the response of the first recorded exchange
// not used yet whose request matches req: same method, URL path and
// query (the credential parameters aside), and a body that
// [Options.Match] accepts. The host is not compared, so a cassette
// recorded against one server answers for any other. The response's body
// is the recorded bytes, so a server-sent event stream reads as it came.
// A request that nothing matches fails with a [*MismatchError].
func (c *Cassette) RoundTrip(req *http.Request) (*http.Response, error) {
	body, err := readAll(req.Body)
	if err != nil {
		return nil, fmt.Errorf("cassette: reading the request's body: %w", err)
	}
	if err := req.Context().Err(); err != nil {
		return nil, err
	}
	if c.mode == Record {
		return c.record(req, body)
	}
	return c.replay(req, body)
}

func (c *Cassette) record(req *http.Request, body []byte) (*http.Response, error) {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	out := req.Clone(req.Context())
	if req.Body != nil {
		out.Body = http.NoBody
		if len(body) > 0 {
			out.Body = io.NopCloser(bytes.NewReader(body))
		}
		out.ContentLength = int64(len(body))
		out.GetBody = func() (io.ReadCloser, error) {
			return io.NopCloser(bytes.NewReader(body)), nil
		}
	}
	resp, err := c.transport.RoundTrip(out)
	if err != nil {
		return nil, err
	}
	respBody, err := readAll(resp.Body)
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(respBody))

	wreq, wreqBody, err := scrubRequest(req, body, c.scrub)
	if err != nil {
		return nil, fmt.Errorf("cassette: scrubbing the request: %w", err)
	}
	wresp, wrespBody, err := scrubResponse(resp, respBody, c.scrubResp)
	if err != nil {
		return nil, fmt.Errorf("cassette: scrubbing the response: %w", err)
	}
	var buf bytes.Buffer
	if err := writeExchange(&buf, wreq, wreqBody, wresp, wrespBody); err != nil {
		return nil, fmt.Errorf("cassette: %w", err)
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	c.recorded.Write(buf.Bytes())
	return resp, nil
}

func (c *Cassette) replay(req *http.Request, body []byte) (*http.Response, error) {
	sreq, sbody, err := scrubRequest(req, body, c.scrub)
	if err != nil {
		return nil, fmt.Errorf("cassette: scrubbing the request: %w", err)
	}
	query := normalQuery(sreq.URL.RawQuery)

	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	for i, x := range c.exchanges {
		if !c.used[i] && x.matches(sreq.Method, sreq.URL, query, sbody, c.match) {
			c.used[i] = true
			return x.response(req), nil
		}
	}
	return nil, c.mismatch(sreq, query, sbody)
}

// response returns a new copy of the recorded response, as an answer to
// req.
func (x *exchange) response(req *http.Request) *http.Response {
	r := *x.resp
	r.Header = x.resp.Header.Clone()
	r.Trailer = x.resp.Trailer.Clone()
	r.TransferEncoding = slices.Clone(x.resp.TransferEncoding)
	r.Body = io.NopCloser(bytes.NewReader(x.respBody))
	r.Request = req
	return &r
}

// Close ends the cassette; RoundTrip fails with [ErrClosed] afterwards.
// Recording, it writes the file (replacing it whole, so that a failed
// write leaves the old one), even when nothing was exchanged. A second
// Close does nothing.
func (c *Cassette) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	if c.mode != Record {
		return nil
	}
	data := make([]byte, 0, len(traceHeader)+1+c.recorded.Len())
	data = append(data, traceHeader+"\n"...)
	data = append(data, c.recorded.Bytes()...)
	if err := writeFile(c.path, data); err != nil {
		return fmt.Errorf("cassette: %w", err)
	}
	return nil
}

// writeFile replaces the file at path with data, creating its directory.
func writeFile(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(0o644)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}
