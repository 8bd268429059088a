package cassette_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/calf-go/calf/model/cassette"
)

// recordingsDir is the shared set of recorded provider traffic, next to
// the repository; see its README.
const recordingsDir = "../../../shared/recordings"

// sharedRecordings returns the files of the shared set, or skips.
func sharedRecordings(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(recordingsDir, "*", "*.httprr"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Skipf("no recordings in %s", recordingsDir)
	}
	return files
}

// recordedExchange is a request and its response as this test reads them
// from a trace file, apart from the package's reader.
type recordedExchange struct {
	req      *http.Request
	reqBody  []byte
	status   int
	respBody []byte
}

func readExchanges(t *testing.T, data []byte) []recordedExchange {
	t.Helper()
	br := bufio.NewReader(bytes.NewReader(data))
	if line, err := br.ReadString('\n'); err != nil || line != "httprr trace v1\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	var xs []recordedExchange
	for {
		var n, m int
		if _, err := fmt.Fscanf(br, "%d %d\n", &n, &m); err == io.EOF {
			return xs
		} else if err != nil {
			t.Fatalf("exchange %d: size line: %v", len(xs)+1, err)
		}
		rawReq, rawResp := make([]byte, n), make([]byte, m)
		if _, err := io.ReadFull(br, rawReq); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(br, rawResp); err != nil {
			t.Fatal(err)
		}
		req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(rawReq)))
		if err != nil {
			t.Fatalf("exchange %d: %v", len(xs)+1, err)
		}
		reqBody, err := io.ReadAll(req.Body)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(rawResp)), req)
		if err != nil {
			t.Fatalf("exchange %d: %v", len(xs)+1, err)
		}
		respBody, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		xs = append(xs, recordedExchange{req, reqBody, resp.StatusCode, respBody})
	}
}

// TestReplaySharedRecordings replays every exchange of every shared
// recording: each recorded request, sent back through the cassette, gets
// the recorded status and body.
func TestReplaySharedRecordings(t *testing.T) {
	for _, file := range sharedRecordings(t) {
		name := filepath.Base(filepath.Dir(file)) + "/" + strings.TrimSuffix(filepath.Base(file), ".httprr")
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			xs := readExchanges(t, data)
			c, err := cassette.Open(file, &cassette.Options{Mode: cassette.Replay, Transport: offline{}})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			client := c.Client()
			client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
			for i, x := range xs {
				req := x.req.Clone(t.Context())
				req.RequestURI = ""
				req.Body = io.NopCloser(bytes.NewReader(x.reqBody))
				resp, err := client.Do(req)
				if err != nil {
					t.Fatalf("exchange %d: %v", i+1, err)
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil {
					t.Fatal(err)
				}
				if resp.StatusCode != x.status {
					t.Errorf("exchange %d: status %d, recorded %d", i+1, resp.StatusCode, x.status)
				}
				if !bytes.Equal(body, x.respBody) {
					t.Errorf("exchange %d: body differs from the recorded one:\n%s\nrecorded:\n%s", i+1, body, x.respBody)
				}
				if ct := resp.Header.Get("Content-Type"); strings.HasPrefix(ct, "text/event-stream") && !bytes.Contains(body, []byte("data:")) {
					t.Errorf("exchange %d: an event stream without events", i+1)
				}
			}
		})
	}
}

// ReadFile gives a recording's exchanges in order, with their bodies.
func TestReadFile(t *testing.T) {
	path := recordingsDir + "/anthropic/langchaingo__TestAnthropic_GenerateContentWithTool.httprr"
	xs, err := cassette.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		t.Skipf("no recordings in %s", recordingsDir)
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(xs) != 2 {
		t.Fatalf("%d exchanges, want 2", len(xs))
	}
	for i, x := range xs {
		if x.Request.URL.Path != "/v1/messages" || x.Response.StatusCode != 200 ||
			!bytes.Contains(x.RequestBody, []byte(`"messages"`)) || !bytes.Contains(x.ResponseBody, []byte(`"type":"message"`)) {
			t.Errorf("exchange %d: %s %d, request %.40q, response %.40q", i+1, x.Request.URL.Path, x.Response.StatusCode, x.RequestBody, x.ResponseBody)
		}
	}
	if !bytes.Contains(xs[0].ResponseBody, []byte(`"tool_use"`)) || !bytes.Contains(xs[1].RequestBody, []byte(`"tool_result"`)) {
		t.Error("the exchanges are not in the recorded order: a tool call, then its result")
	}
	if _, err := cassette.ReadFile(t.TempDir() + "/none.httprr"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing file: %v; want fs.ErrNotExist", err)
	}
}
