package builtin_test

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/calf-go/calf/tool"
	"github.com/calf-go/calf/tool/builtin"
)

// serveOn starts an HTTP server on the loopback address addr (port 0).
func serveOn(t *testing.T, addr string, h http.Handler) string {
	t.Helper()
	l, err := net.Listen("tcp", addr+":0")
	if err != nil {
		t.Skipf("listen on %s: %v", addr, err)
	}
	srv := &httptest.Server{Listener: l, Config: &http.Server{Handler: h}}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL
}

func newFetch(t *testing.T, opts *builtin.FetchOptions) tool.Tool {
	t.Helper()
	f, err := builtin.WebFetch(opts)
	if err != nil {
		t.Fatal(err)
	}
	if k := tool.KindOf(f); k != tool.KindNetwork {
		t.Errorf("web_fetch is %q, want %q", k, tool.KindNetwork)
	}
	return f
}

var allowLoopback1 = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}

func TestWebFetch(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/page", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<html><head><title>T</title><script>alert("x")</script><style>p{}</style></head>
<body><h1>Hello</h1><p>A <a href="/other">link</a> and <b>bold</b>.</p></body></html>`)
	})
	mux.HandleFunc("/json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"a":1}`)
	})
	mux.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/json", http.StatusFound) })
	mux.HandleFunc("/image", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		w.Write([]byte("\x89PNG\r\n\x1a\n"))
	})
	mux.HandleFunc("/missing", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "no such page", http.StatusNotFound) })
	base := serveOn(t, "127.0.0.1", mux)
	f := newFetch(t, &builtin.FetchOptions{Allow: allowLoopback1})

	out, err := call(t, f, map[string]any{"url": base + "/page"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# Hello", "[link](" + base + "/other)", "**bold**", "Status: 200"} {
		if !strings.Contains(out, want) {
			t.Errorf("page lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "alert") || strings.Contains(out, "p{}") {
		t.Errorf("page keeps its script or style:\n%s", out)
	}
	out, err = call(t, f, map[string]any{"url": base + "/moved"})
	if err != nil || !strings.Contains(out, `{"a":1}`) || !strings.Contains(out, "URL: "+base+"/json") {
		t.Errorf("redirect to JSON = %q, %v", out, err)
	}
	if _, err := call(t, f, map[string]any{"url": base + "/image"}); err == nil || !strings.Contains(err.Error(), "image/png") {
		t.Errorf("image: %v", err)
	}
	if _, err := call(t, f, map[string]any{"url": base + "/missing"}); err == nil || !strings.Contains(err.Error(), "404") || !strings.Contains(err.Error(), "no such page") {
		t.Errorf("404: %v", err)
	}
}

func TestWebFetchRefusesPrivateAddresses(t *testing.T) {
	hit := make(chan string, 10)
	target := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hit <- r.Host + r.URL.Path
		fmt.Fprint(w, "secret")
	})
	loopback := serveOn(t, "127.0.0.1", target)
	other := serveOn(t, "127.0.0.2", target)
	port := loopback[strings.LastIndexByte(loopback, ':')+1:]
	// An allowed server that redirects to a forbidden one.
	redirector := serveOn(t, "127.0.0.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other+"/internal", http.StatusFound)
	}))

	strict := newFetch(t, nil)
	allowOne := newFetch(t, &builtin.FetchOptions{Allow: allowLoopback1})
	for _, tt := range []struct {
		name string
		f    tool.Tool
		url  string
	}{
		{"loopback", strict, loopback + "/"},
		{"loopback by name", strict, "http://localhost:" + port + "/"},
		{"loopback, IPv6", strict, "http://[::1]:" + port + "/"},
		{"IPv4-mapped IPv6 loopback", strict, "http://[::ffff:127.0.0.1]:" + port + "/"},
		{"IPv4-compatible IPv6 loopback", strict, "http://[::127.0.0.1]:" + port + "/"},
		{"IPv4-compatible IPv6 loopback, 127.0.0.1 allowed", allowOne, "http://[::127.0.0.1]:" + port + "/"},
		{"IPv4-translated IPv6 loopback", strict, "http://[::ffff:0:127.0.0.1]:" + port + "/"},
		{"NAT64 of loopback", strict, "http://[64:ff9b::127.0.0.1]:" + port + "/"},
		{"6to4 of loopback", strict, "http://[2002:7f00:1::1]:" + port + "/"},
		{"Teredo", strict, "http://[2001::7f00:1]:" + port + "/"},
		{"metadata service", strict, "http://169.254.169.254/latest/meta-data/"},
		{"private", strict, "http://10.0.0.1/"},
		{"unspecified", strict, "http://0.0.0.0:" + port + "/"},
		{"redirect to a forbidden address", allowOne, redirector + "/"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			_, err := call(t, tt.f, map[string]any{"url": tt.url})
			if !errors.Is(err, builtin.ErrForbiddenAddress) {
				t.Errorf("fetch %s: %v, want %v", tt.url, err, builtin.ErrForbiddenAddress)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("refusal took %s", d)
			}
		})
	}
	select {
	case h := <-hit:
		t.Errorf("a forbidden server was reached: %s", h)
	default:
	}
	// Go does not read 2130706433 as 127.0.0.1: it is a name that does
	// not resolve.
	for _, u := range []string{"file:///etc/passwd", "ftp://example.com/", "gopher://x/", "http:///nohost", "http://2130706433:" + port + "/"} {
		if _, err := call(t, strict, map[string]any{"url": u}); err == nil {
			t.Errorf("fetch %s succeeded", u)
		}
	}
}

func TestWebFetchLimits(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/huge", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		chunk := []byte(strings.Repeat("x", 64<<10))
		for range 160 { // 10 MiB
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	})
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/loop", http.StatusFound) })
	base := serveOn(t, "127.0.0.1", mux)
	f := newFetch(t, &builtin.FetchOptions{Allow: allowLoopback1, MaxBytes: 1 << 20, MaxTextBytes: 1000, Timeout: 500 * time.Millisecond})

	out, err := call(t, f, map[string]any{"url": base + "/huge"})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) > 1300 || !strings.Contains(out, "cut at 1048576 bytes") || !strings.Contains(out, "more bytes") {
		t.Errorf("10 MiB body gave %d bytes of text:\n%.300s", len(out), out)
	}
	start := time.Now()
	if _, err := call(t, f, map[string]any{"url": base + "/slow"}); err == nil || !strings.Contains(err.Error(), "500ms") {
		t.Errorf("slow server: %v", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("slow server took %s", d)
	}
	if _, err := call(t, f, map[string]any{"url": base + "/loop"}); err == nil || !strings.Contains(err.Error(), "redirects") {
		t.Errorf("redirect loop: %v", err)
	}
}
