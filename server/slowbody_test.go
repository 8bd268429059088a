package server_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/server"
)

// rawRequest opens a connection to hs and sends the headers of a POST of
// a 1000-byte body to path, with token when not empty, and no body.
func rawRequest(t *testing.T, hs string, path, token string) net.Conn {
	t.Helper()
	u, _ := url.Parse(hs)
	c, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	head := "POST " + path + " HTTP/1.1\r\nHost: " + u.Host + "\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n"
	if token != "" {
		head += "Authorization: Bearer " + token + "\r\n"
	}
	if _, err := io.WriteString(c, head+"\r\n"); err != nil {
		t.Fatal(err)
	}
	// Well under the time a body trickling at a byte every 50 ms takes
	// (50 s), and above what a loaded machine takes to answer.
	_ = c.SetReadDeadline(time.Now().Add(15 * time.Second))
	return c
}

// answer reads the response on c and then the end of the connection: the
// server must close it.
func answer(t *testing.T, c net.Conn) (*http.Response, string) {
	t.Helper()
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("the answer's body: %v", err)
	}
	// Closed: an end, or a reset when the client wrote after the close.
	if _, err := br.ReadByte(); err != io.EOF && !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("the connection is not closed after the answer: %v", err)
	}
	return resp, string(body)
}

// A request without a token is refused before its body is read: 401 at
// once, the connection closed, though the body never comes. An
// authenticated request whose body trickles is cut after the body
// timeout (408, closed). A streamed answer, whose request is done with its
// body, outlasts that timeout.
func TestSlowBodies(t *testing.T) {
	rt := testRuntime(t)
	m := &gatedModel{release: make(chan struct{})}
	const bound = 300 * time.Millisecond
	hs, _ := serveAgent(t, rt, agent.Must(agent.New("gated", m, nil)), true, &server.Options{
		Tokens: map[string]string{"tok-ann": "ann"}, BodyTimeout: bound,
	})

	for _, path := range []string{"/v1/chat/completions", "/agui/gated", "/"} {
		c := rawRequest(t, hs.URL, path, "")
		if resp, body := answer(t, c); path != "/" && (resp.StatusCode != 401 || !strings.Contains(body, "invalid_api_key")) {
			t.Errorf("%s without a token: %s %s", path, resp.Status, body)
		}
	}

	c := rawRequest(t, hs.URL, "/v1/chat/completions", "tok-ann")
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if _, err := c.Write([]byte(" ")); err != nil {
					return
				}
			}
		}
	}()
	start := time.Now()
	if resp, body := answer(t, c); resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(body, "request_timeout") {
		t.Errorf("a trickling body: %s %s", resp.Status, body)
	}
	if d := time.Since(start); d < bound {
		t.Errorf("a trickling body cut after %s, before the bound %s", d, bound)
	}

	// A stream that lasts beyond the bound is not cut.
	resp, events := post(t, t.Context(), hs.URL+"/v1/chat/completions", "tok-ann", `{"model":"gated","stream":true,"messages":[{"role":"user","content":"count"}]}`, nil)
	defer resp.Body.Close()
	<-events
	time.Sleep(3 * bound) // the time the bound would cut the connection in
	close(m.release)
	last := ""
	for ev := range events {
		last = ev.data
	}
	if last != "[DONE]" {
		t.Errorf("a stream longer than the body timeout ends with %q", last)
	}
}
