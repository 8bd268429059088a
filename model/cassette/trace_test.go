package cassette

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// trace builds a trace file of raw exchanges, each a request and a
// response.
func trace(raw ...string) []byte {
	var b strings.Builder
	b.WriteString("httprr trace v1\n")
	for i := 0; i+1 < len(raw); i += 2 {
		fmt.Fprintf(&b, "%d %d\n%s%s", len(raw[i]), len(raw[i+1]), raw[i], raw[i+1])
	}
	return []byte(b.String())
}

// A trace as other recorders write them: a header line ending in a bare
// line feed, an HTTP/2.0 status line, chunked framing in the body.
var foreignTrace = trace(
	"POST https://generativelanguage.example/v1beta/models/m:generateContent?%24alt=json%3Benum-encoding%3Dint HTTP/1.1\r\n"+
		"Host: generativelanguage.example\r\n"+
		"User-Agent: recorder\n"+
		"Content-Length: 14\r\n"+
		"Content-Type: application/json\r\n\r\n"+
		`{"contents":1}`,
	"HTTP/2.0 200 OK\r\n"+
		"Content-Length: 11\r\n"+
		"Content-Type: application/json\r\n\r\n"+
		`{"done":42}`,
	"POST http://localhost:11434/api/chat HTTP/1.1\r\n"+
		"Host: localhost:11434\r\n"+
		"Content-Length: 2\r\n\r\n{}",
	"HTTP/1.1 200 OK\r\n"+
		"Transfer-Encoding: chunked\r\n"+
		"Content-Type: application/x-ndjson\r\n\r\n"+
		"c\r\n{\"a\":1}\n{\"b\"\r\n"+
		"3\r\n:2}\r\n"+
		"0\r\n\r\n",
)

func TestReadTraceTolerates(t *testing.T) {
	xs, err := readTrace(foreignTrace)
	if err != nil {
		t.Fatal(err)
	}
	if len(xs) != 2 {
		t.Fatalf("%d exchanges, want 2", len(xs))
	}
	if ua := xs[0].req.Header.Get("User-Agent"); ua != "recorder" {
		t.Errorf("User-Agent = %q", ua)
	}
	if got := strings.Join(xs[0].query, "&"); got != "$alt=json;enum-encoding=int" {
		t.Errorf("query = %q", got)
	}
	if xs[0].resp.ProtoMajor != 2 || string(xs[0].respBody) != `{"done":42}` {
		t.Errorf("HTTP/2.0 response: %s %q", xs[0].resp.Proto, xs[0].respBody)
	}
	if got := string(xs[1].respBody); got != "{\"a\":1}\n{\"b\":2}" {
		t.Errorf("chunked body = %q", got)
	}
}

func TestReadTraceRejects(t *testing.T) {
	good := "GET http://h/ HTTP/1.1\r\nHost: h\r\n\r\n"
	resp := "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
	tests := map[string][]byte{
		"no header":         []byte("GET / HTTP/1.1\r\n"),
		"other version":     []byte("httprr trace v2\n"),
		"no size line":      []byte("httprr trace v1\n12"),
		"bad size line":     []byte("httprr trace v1\n1 2 3\n"),
		"negative size":     []byte("httprr trace v1\n-1 2\n"),
		"short":             []byte("httprr trace v1\n100 100\nGET"),
		"bad request":       trace("nonsense\r\n\r\n", resp),
		"bytes after body":  trace(good+"extra", resp),
		"short body":        trace(good, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nok"),
		"response trailing": trace(good, resp+"more"),
	}
	for name, data := range tests {
		if _, err := readTrace(data); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestWriteSharedRecordings writes every exchange of the shared
// recordings again and reads it back: the writer's output is a trace the
// reader takes, with the same requests and responses.
func TestWriteSharedRecordings(t *testing.T) {
	files, _ := filepath.Glob("../../../shared/recordings/*/*.httprr")
	if len(files) == 0 {
		t.Skip("no shared recordings")
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		xs, err := readTrace(data)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		var buf bytes.Buffer
		buf.WriteString(traceHeader + "\n")
		for _, x := range xs {
			if err := writeExchange(&buf, x.req, x.reqBody, x.resp, x.respBody); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
		}
		again, err := readTrace(buf.Bytes())
		if err != nil {
			t.Fatalf("%s written again: %v", file, err)
		}
		if len(again) != len(xs) {
			t.Fatalf("%s: %d exchanges written, %d read", file, len(xs), len(again))
		}
		for i, x := range xs {
			y := again[i]
			if x.req.Method != y.req.Method || x.req.URL.String() != y.req.URL.String() ||
				!bytes.Equal(x.reqBody, y.reqBody) || x.resp.StatusCode != y.resp.StatusCode ||
				!bytes.Equal(x.respBody, y.respBody) || x.resp.Header.Get("Content-Type") != y.resp.Header.Get("Content-Type") {
				t.Errorf("%s: exchange %d changed when written again", file, i+1)
			}
		}
	}
}

func FuzzReadTrace(f *testing.F) {
	f.Add(foreignTrace)
	f.Add([]byte("httprr trace v1\n"))
	f.Add(trace("GET http://h/x?key=k HTTP/1.1\r\nHost: h\r\n\r\n", "HTTP/1.1 204 No Content\r\n\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		xs, err := readTrace(data)
		if err != nil {
			return
		}
		var buf bytes.Buffer
		buf.WriteString(traceHeader + "\n")
		for _, x := range xs {
			if err := writeExchange(&buf, x.req, x.reqBody, x.resp, x.respBody); err != nil {
				return // some requests read cannot be written, such as one without a host
			}
		}
		again, err := readTrace(buf.Bytes())
		if err != nil {
			t.Fatalf("a trace written from one read does not read: %v\n%q", err, buf.Bytes())
		}
		for i, x := range xs {
			if !bytes.Equal(x.reqBody, again[i].reqBody) || !bytes.Equal(x.respBody, again[i].respBody) {
				t.Errorf("exchange %d: bodies changed when written again", i+1)
			}
		}
	})
}
