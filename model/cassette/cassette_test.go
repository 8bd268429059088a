package cassette_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/calf-go/calf/model/cassette"
)

// newServer starts a server with a JSON endpoint that echoes what it was
// sent and a server-sent events endpoint. A request to either sets
// *calls.
func newServer(t *testing.T) (*httptest.Server, *int) {
	t.Helper()
	var mu sync.Mutex
	calls := new(int)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/echo", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		*calls++
		mu.Unlock()
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Request-Id", "req-1")
		json.NewEncoder(w).Encode(map[string]any{
			"body":  json.RawMessage(body),
			"query": r.URL.Query(),
		})
	})
	mux.HandleFunc("GET /v1/stream", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		*calls++
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 3 {
			fmt.Fprintf(w, "event: delta\ndata: {\"n\":%d}\n\n", i)
			w.(http.Flusher).Flush()
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, calls
}

// offline is a transport that fails every request: a cassette that
// replays never uses it.
type offline struct{}

func (offline) RoundTrip(*http.Request) (*http.Response, error) {
	return nil, errors.New("offline: the network was used")
}

// got is what a test compares of a response.
type got struct {
	Status           int
	Header           http.Header
	TransferEncoding []string
	ContentLength    int64
	Body             string
}

func do(t *testing.T, c *http.Client, method, url, body string) got {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return got{resp.StatusCode, resp.Header, resp.TransferEncoding, resp.ContentLength, string(b)}
}

func open(t *testing.T, path string, opts *cassette.Options) *cassette.Cassette {
	t.Helper()
	c, err := cassette.Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestRecordThenReplay(t *testing.T) {
	srv, calls := newServer(t)
	path := filepath.Join(t.TempDir(), "sub", "calls.httprr")
	requests := []struct{ method, path, body string }{
		{"POST", "/v1/echo?b=2&a=1", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`},
		{"GET", "/v1/stream", ""},
		{"POST", "/v1/echo", `{"model":"m","n":2}`},
	}

	rec := open(t, path, &cassette.Options{Mode: cassette.Record})
	if rec.Mode() != cassette.Record {
		t.Fatalf("Mode() = %v, want record", rec.Mode())
	}
	var live []got
	for _, r := range requests {
		live = append(live, do(t, rec.Client(), r.method, srv.URL+r.path, r.body))
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	if *calls != len(requests) {
		t.Fatalf("server saw %d calls, want %d", *calls, len(requests))
	}
	if live[1].TransferEncoding == nil {
		t.Fatal("the stream came without chunked framing; the test no longer checks it")
	}

	// Replay against another host: the server is gone and the transport
	// fails, so every answer comes from the file.
	srv.Close()
	rep := open(t, path, &cassette.Options{Mode: cassette.Replay, Transport: offline{}})
	defer rep.Close()
	for i, r := range requests {
		replayed := do(t, rep.Client(), r.method, "http://replay.invalid"+r.path, r.body)
		if diff := cmp.Diff(live[i], replayed); diff != "" {
			t.Errorf("%s %s replayed differs (-live +replayed):\n%s", r.method, r.path, diff)
		}
	}
	if *calls != len(requests) {
		t.Errorf("replay reached the server: %d calls", *calls)
	}
}

func TestReplayStreamsEventByEvent(t *testing.T) {
	srv, _ := newServer(t)
	path := filepath.Join(t.TempDir(), "stream.httprr")
	rec := open(t, path, &cassette.Options{Mode: cassette.Record})
	live := do(t, rec.Client(), "GET", srv.URL+"/v1/stream", "")
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}

	rep := open(t, path, &cassette.Options{Mode: cassette.Replay})
	defer rep.Close()
	resp, err := rep.Client().Get("http://replay.invalid/v1/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type = %q", ct)
	}
	var data []string
	var raw strings.Builder
	sc := bufio.NewScanner(io.TeeReader(resp.Body, &raw))
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			data = append(data, d)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	want := []string{`{"n":0}`, `{"n":1}`, `{"n":2}`, "[DONE]"}
	if diff := cmp.Diff(want, data); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if raw.String() != live.Body {
		t.Errorf("replayed stream is not byte for byte the live one:\n%q\n%q", raw.String(), live.Body)
	}
}

func TestReplayUsesEachExchangeOnceInOrder(t *testing.T) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "answer %d", n.Add(1))
	}))
	defer srv.Close()
	path := filepath.Join(t.TempDir(), "twice.httprr")
	rec := open(t, path, &cassette.Options{Mode: cassette.Record})
	for range 2 {
		do(t, rec.Client(), "POST", srv.URL+"/v1/same", `{"q":1}`)
	}
	rec.Close()

	rep := open(t, path, &cassette.Options{Mode: cassette.Replay})
	defer rep.Close()
	for i := 1; i <= 2; i++ {
		if g := do(t, rep.Client(), "POST", srv.URL+"/v1/same", `{"q":1}`); g.Body != fmt.Sprintf("answer %d", i) {
			t.Errorf("replay %d = %q", i, g.Body)
		}
	}
	_, err := rep.Client().Post(srv.URL+"/v1/same", "application/json", strings.NewReader(`{"q":1}`))
	var mm *cassette.MismatchError
	if !errors.As(err, &mm) || mm.Nearest != 0 || !strings.Contains(err.Error(), "every recorded exchange has been used") {
		t.Errorf("third request: %v", err)
	}
}

func TestReplayMismatchShowsDiff(t *testing.T) {
	srv, _ := newServer(t)
	path := filepath.Join(t.TempDir(), "diff.httprr")
	rec := open(t, path, &cassette.Options{Mode: cassette.Record})
	do(t, rec.Client(), "GET", srv.URL+"/v1/stream", "")
	do(t, rec.Client(), "POST", srv.URL+"/v1/echo", `{"model":"m","temperature":0.5,"messages":["hi"]}`)
	rec.Close()

	rep := open(t, path, &cassette.Options{Mode: cassette.Replay})
	defer rep.Close()
	_, err := rep.Client().Post(srv.URL+"/v1/echo", "application/json",
		strings.NewReader(`{"model":"m","temperature":0.7,"messages":["hi"]}`))
	var mm *cassette.MismatchError
	if !errors.As(err, &mm) {
		t.Fatalf("err = %v, want a *MismatchError", err)
	}
	if mm.Nearest != 2 {
		t.Errorf("Nearest = %d, want 2 (the unused exchange with the same method and path)", mm.Nearest)
	}
	msg := err.Error()
	for _, want := range []string{path, "POST " + srv.URL + "/v1/echo", "-recorded +sent", "0.5", "0.7", "CALF_RECORD=1"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q:\n%s", want, msg)
		}
	}
	for line := range strings.Lines(mm.Diff) {
		if l := strings.TrimSpace(line); (strings.HasPrefix(l, "-") || strings.HasPrefix(l, "+")) && !strings.Contains(l, "temperature") {
			t.Errorf("diff marks a field that is equal: %s", l)
		}
	}

	// Another path: the nearest is the first unused exchange.
	_, err = rep.Client().Post(srv.URL+"/v1/other", "text/plain", strings.NewReader("x"))
	if !errors.As(err, &mm) || mm.Nearest != 1 || !strings.Contains(mm.Diff, "/v1/other") {
		t.Errorf("other path: %v", err)
	}
}

func TestReplayNormalizesBodies(t *testing.T) {
	srv, _ := newServer(t)
	path := filepath.Join(t.TempDir(), "bodies.httprr")
	rec := open(t, path, &cassette.Options{Mode: cassette.Record})
	do(t, rec.Client(), "POST", srv.URL+"/v1/echo?x=1&y=2", `{"a":1,"b":{"c":[1,2],"d":"e"}}`)
	do(t, rec.Client(), "POST", srv.URL+"/v1/echo", "plain text")
	rec.Close()

	rep := open(t, path, &cassette.Options{Mode: cassette.Replay})
	defer rep.Close()
	// Keys reordered, white space added, query reordered.
	do(t, rep.Client(), "POST", srv.URL+"/v1/echo?y=2&x=1", "{\n  \"b\": {\"d\": \"e\", \"c\": [1, 2]},\n  \"a\": 1\n}\n")
	// A text body must be equal byte for byte.
	if _, err := rep.Client().Post(srv.URL+"/v1/echo", "text/plain", strings.NewReader("plain  text")); err == nil {
		t.Error("a text body that differs matched")
	}
	do(t, rep.Client(), "POST", srv.URL+"/v1/echo", "plain text")
}

func TestMatchOption(t *testing.T) {
	srv, _ := newServer(t)
	path := filepath.Join(t.TempDir(), "match.httprr")
	rec := open(t, path, &cassette.Options{Mode: cassette.Record})
	do(t, rec.Client(), "POST", srv.URL+"/v1/echo", `{"prompt":"hi","seed":1}`)
	rec.Close()

	withoutSeed := func(b []byte) []byte {
		var m map[string]any
		if json.Unmarshal(b, &m) != nil {
			return b
		}
		delete(m, "seed")
		out, _ := json.Marshal(m)
		return out
	}
	rep := open(t, path, &cassette.Options{
		Mode: cassette.Replay,
		Match: func(recorded, sent []byte) bool {
			return cassette.EqualBody(withoutSeed(recorded), withoutSeed(sent))
		},
	})
	defer rep.Close()
	do(t, rep.Client(), "POST", srv.URL+"/v1/echo", `{"prompt":"hi","seed":42}`)
}

func TestEqualBody(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{`{"a":1,"b":2}`, `{"b":2,"a":1}`, true},
		{`{"a":1,"b":2}`, " {\n\t\"b\" : 2 ,\"a\":1}\n", true},
		{`[1,2]`, `[2,1]`, false},
		{`{"a":1}`, `{"a":1.0}`, false},
		{`{"n":12345678901234567890}`, `{"n":12345678901234567891}`, false},
		{`{"a":null}`, `{}`, false},
		{`{"a":1}`, `{"a":1}{"a":1}`, false},
		{"{\"a\":1}\n{\"b\":2}\n", "{\"a\":1}\n{\"b\":2}\n", true},
		{"{\"a\":1}\n{\"b\":2}\n", "{\"a\":1}\n{\"b\": 2}\n", false},
		{"text", "text", true},
		{"text", "text ", false},
		{"", "", true},
		{"", " ", false},
	}
	for _, tt := range tests {
		if got := cassette.EqualBody([]byte(tt.a), []byte(tt.b)); got != tt.want {
			t.Errorf("EqualBody(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

// secrets are credentials a request sends; none may reach a file.
var secrets = []string{
	"sk-bearer-secret", "proxy-secret", "x-api-key-secret", "api-key-secret",
	"goog-key-secret", "cookie-secret", "set-cookie-secret", "query-key-secret", "url-password",
}

func TestRecordScrubsCredentials(t *testing.T) {
	var mu sync.Mutex
	var seen http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = r.Header.Clone()
		mu.Unlock()
		http.SetCookie(w, &http.Cookie{Name: "session", Value: "set-cookie-secret"})
		w.Header().Set("X-Api-Key", "x-api-key-secret")
		fmt.Fprint(w, `{"ok":true}`)
	}))
	defer srv.Close()
	path := filepath.Join(t.TempDir(), "scrub.httprr")
	rec := open(t, path, &cassette.Options{Mode: cassette.Record})
	send := func(c *http.Client, key string) got {
		req, _ := http.NewRequest("POST", srv.URL+"/v1beta/models/m:generateContent?alt=sse&key="+key, strings.NewReader(`{"q":1}`))
		req.Header.Set("Authorization", "Bearer sk-bearer-secret")
		req.Header.Set("Proxy-Authorization", "Basic proxy-secret")
		req.Header["x-api-key"] = []string{"x-api-key-secret"} // not canonical
		req.Header.Set("Api-Key", "api-key-secret")
		req.Header.Set("X-Goog-Api-Key", "goog-key-secret")
		req.Header.Set("Cookie", "a=cookie-secret")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return got{Status: resp.StatusCode, Body: string(b)}
	}
	send(rec.Client(), "query-key-secret")
	// The server got the credentials: only the file is scrubbed.
	mu.Lock()
	if seen.Get("Authorization") != "Bearer sk-bearer-secret" || seen.Get("X-Api-Key") != "x-api-key-secret" {
		t.Errorf("the server did not get the credentials: %v", seen)
	}
	mu.Unlock()
	userURL := strings.Replace(srv.URL, "http://", "http://user:url-password@", 1)
	do(t, rec.Client(), "GET", userURL+"/v1/models", "")
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}

	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	basic := base64.StdEncoding.EncodeToString([]byte("user:url-password"))
	for _, s := range append(secrets, basic) {
		if strings.Contains(string(data), s) {
			t.Errorf("the file holds %q:\n%s", s, data)
		}
	}
	for _, want := range []string{"Authorization: REDACTED", "key=REDACTED", "Set-Cookie: REDACTED", "alt=sse"} {
		if !strings.Contains(string(data), want) {
			t.Errorf("the file lacks %q:\n%s", want, data)
		}
	}

	// Replay matches whatever key the request carries.
	rep := open(t, path, &cassette.Options{Mode: cassette.Replay})
	defer rep.Close()
	if g := send(rep.Client(), "another-key"); g.Body != `{"ok":true}` {
		t.Errorf("replayed %q", g.Body)
	}
}

func TestScrubOptions(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Openai-Organization", "org-secret")
		fmt.Fprint(w, `{"id":"resp-1","account":"acct-secret"}`)
	}))
	defer srv.Close()
	dropUser := func(req *http.Request) error {
		b, err := io.ReadAll(req.Body)
		if err != nil {
			return err
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			return err
		}
		m["user"] = cassette.Redacted
		b, _ = json.Marshal(m)
		req.Body = io.NopCloser(strings.NewReader(string(b)))
		return nil
	}
	opts := &cassette.Options{
		Mode:  cassette.Record,
		Scrub: dropUser,
		ScrubResponse: func(resp *http.Response) error {
			resp.Header.Del("Openai-Organization")
			b, _ := io.ReadAll(resp.Body)
			resp.Body = io.NopCloser(strings.NewReader(strings.ReplaceAll(string(b), "acct-secret", cassette.Redacted)))
			return nil
		},
	}
	path := filepath.Join(t.TempDir(), "scrub.httprr")
	rec := open(t, path, opts)
	live := do(t, rec.Client(), "POST", srv.URL+"/v1/chat", `{"prompt":"hi","user":"user-secret"}`)
	if !strings.Contains(live.Body, "acct-secret") || live.Header.Get("Openai-Organization") != "org-secret" {
		t.Errorf("the live response was scrubbed: %+v", live)
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	for _, s := range []string{"user-secret", "org-secret", "acct-secret"} {
		if strings.Contains(string(data), s) {
			t.Errorf("the file holds %q:\n%s", s, data)
		}
	}

	// Scrub runs before matching: another user matches.
	opts.Mode = cassette.Replay
	rep := open(t, path, opts)
	defer rep.Close()
	if g := do(t, rep.Client(), "POST", srv.URL+"/v1/chat", `{"user":"someone-else","prompt":"hi"}`); g.Body != `{"id":"resp-1","account":"REDACTED"}` {
		t.Errorf("replayed %q", g.Body)
	}
}

func TestMissingCassette(t *testing.T) {
	path := filepath.Join(t.TempDir(), "none.httprr")
	_, err := cassette.Open(path, nil)
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "CALF_RECORD=1 go test") {
		t.Errorf("Open of a missing file: %v", err)
	}

	ft := &fakeTB{name: "TestX/sub case"}
	ft.run(func() { cassette.ForTest(ft, path, nil) })
	for _, want := range []string{path, "CALF_RECORD=1 go test -run '^TestX$/^sub case$'"} {
		if !strings.Contains(ft.fatal, want) {
			t.Errorf("ForTest's failure lacks %q: %s", want, ft.fatal)
		}
	}
}

// fakeTB is a testing.TB whose failures are kept, to test ForTest.
type fakeTB struct {
	testing.TB
	name     string
	fatal    string
	errors   []string
	cleanups []func()
}

func (f *fakeTB) Helper()           {}
func (f *fakeTB) Name() string      { return f.name }
func (f *fakeTB) Cleanup(fn func()) { f.cleanups = append(f.cleanups, fn) }
func (f *fakeTB) Error(args ...any) { f.errors = append(f.errors, fmt.Sprint(args...)) }
func (f *fakeTB) Fatal(args ...any) {
	f.fatal = fmt.Sprint(args...)
	runtime.Goexit()
}

// run calls fn as a test would, then the cleanups.
func (f *fakeTB) run(fn func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	<-done
	for i := len(f.cleanups) - 1; i >= 0; i-- {
		f.cleanups[i]()
	}
}

func TestForTestDefaultPath(t *testing.T) {
	srv, _ := newServer(t)
	t.Chdir(t.TempDir())
	ft := &fakeTB{name: "TestAnswer/streamed reply"}
	var err error
	ft.run(func() {
		c := cassette.ForTest(ft, "", &cassette.Options{Mode: cassette.Record})
		var resp *http.Response
		if resp, err = c.Get(srv.URL + "/v1/stream"); err == nil {
			resp.Body.Close()
		}
	})
	if err != nil || ft.fatal != "" || ft.errors != nil {
		t.Fatal(err, ft.fatal, ft.errors)
	}
	if _, err := os.Stat(filepath.Join("testdata", "TestAnswer-streamed_reply.httprr")); err != nil {
		t.Error(err)
	}
}

func TestRecordAgainWithEnv(t *testing.T) {
	var answer atomic.Value
	answer.Store("first")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, answer.Load())
	}))
	defer srv.Close()
	path := filepath.Join(t.TempDir(), "env.httprr")
	get := func(t *testing.T) string {
		c := cassette.ForTest(t, path, &cassette.Options{Transport: srv.Client().Transport})
		return do(t, c, "GET", srv.URL+"/v1/answer", "").Body
	}

	t.Setenv(cassette.EnvRecord, "1")
	if !cassette.Recording() {
		t.Fatal("Recording() = false with CALF_RECORD=1")
	}
	t.Run("record", func(t *testing.T) { get(t) })

	t.Setenv(cassette.EnvRecord, "")
	answer.Store("second")
	t.Run("replay", func(t *testing.T) {
		if g := get(t); g != "first" {
			t.Errorf("replayed %q, want first", g)
		}
	})

	t.Setenv(cassette.EnvRecord, "1")
	t.Run("record again", func(t *testing.T) {
		if g := get(t); g != "second" {
			t.Errorf("recording got %q, want second", g)
		}
	})

	t.Setenv(cassette.EnvRecord, "")
	srv.Close()
	t.Run("replay again", func(t *testing.T) {
		if g := get(t); g != "second" {
			t.Errorf("replayed %q, want second", g)
		}
	})
}

func TestConcurrentRecordAndReplay(t *testing.T) {
	srv, _ := newServer(t)
	path := filepath.Join(t.TempDir(), "concurrent.httprr")
	const n = 16
	run := func(c *http.Client, url string) []string {
		bodies := make([]string, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				resp, err := c.Post(url+"/v1/echo", "application/json", strings.NewReader(fmt.Sprintf(`{"n":%d}`, i)))
				if err != nil {
					t.Error(err)
					return
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				bodies[i] = string(b)
			})
		}
		wg.Wait()
		return bodies
	}
	rec := open(t, path, &cassette.Options{Mode: cassette.Record})
	live := run(rec.Client(), srv.URL)
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	rep := open(t, path, &cassette.Options{Mode: cassette.Replay})
	defer rep.Close()
	if diff := cmp.Diff(live, run(rep.Client(), "http://replay.invalid")); diff != "" {
		t.Errorf("replayed (-live +replayed):\n%s", diff)
	}
}

func TestClosed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "closed.httprr")
	rec := open(t, path, &cassette.Options{Mode: cassette.Record})
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	if err := rec.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	data, _ := os.ReadFile(path)
	if string(data) != "httprr trace v1\n" {
		t.Errorf("empty recording = %q", data)
	}
	rep := open(t, path, nil)
	rep.Close()
	if _, err := rep.Client().Get("http://replay.invalid/"); !errors.Is(err, cassette.ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
}

func TestReplayCancelled(t *testing.T) {
	srv, _ := newServer(t)
	path := filepath.Join(t.TempDir(), "cancel.httprr")
	rec := open(t, path, &cassette.Options{Mode: cassette.Record})
	do(t, rec.Client(), "GET", srv.URL+"/v1/stream", "")
	rec.Close()
	rep := open(t, path, &cassette.Options{Mode: cassette.Replay})
	defer rep.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/v1/stream", nil)
	if _, err := rep.Client().Do(req); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled request: %v", err)
	}
}

func TestOpenBadFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.httprr")
	os.WriteFile(path, []byte("httprr trace v1\n10 10\nshort"), 0o644)
	if _, err := cassette.Open(path, nil); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("Open of a truncated file: %v", err)
	}
}
