package cassette

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
)

// traceHeader is the first line of a cassette file.
const traceHeader = "httprr trace v1"

// An exchange is one recorded request and its response, read from a
// cassette file.
type exchange struct {
	req      *http.Request // as read, Body nil
	reqBody  []byte
	query    []string       // the request's query as compared, see normalQuery
	resp     *http.Response // as read, Body nil
	respBody []byte         // de-chunked
}

// readTrace reads the exchanges of a cassette file: the line
// "httprr trace v1", then for each exchange a line "N M" and N bytes of
// request and M bytes of response as Go's Request.Write and
// Response.Write put them.
func readTrace(data []byte) ([]*exchange, error) {
	line, rest, ok := bytes.Cut(data, []byte("\n"))
	if !ok || string(bytes.TrimSuffix(line, []byte("\r"))) != traceHeader {
		return nil, errors.New("not an " + traceHeader + " file")
	}
	var xs []*exchange
	for n := 1; len(rest) > 0; n++ {
		line, rest, ok = bytes.Cut(rest, []byte("\n"))
		if !ok {
			return nil, fmt.Errorf("exchange %d: no size line", n)
		}
		nreq, nresp, err := parseSizes(string(bytes.TrimSuffix(line, []byte("\r"))))
		if err != nil {
			return nil, fmt.Errorf("exchange %d: %w", n, err)
		}
		if nreq > len(rest) || nresp > len(rest)-nreq {
			return nil, fmt.Errorf("exchange %d: %d+%d bytes announced, %d left", n, nreq, nresp, len(rest))
		}
		x, err := readExchange(rest[:nreq], rest[nreq:nreq+nresp])
		if err != nil {
			return nil, fmt.Errorf("exchange %d: %w", n, err)
		}
		xs = append(xs, x)
		rest = rest[nreq+nresp:]
	}
	return xs, nil
}

// parseSizes parses a size line, "N M".
func parseSizes(line string) (nreq, nresp int, err error) {
	f := strings.Fields(line)
	if len(f) != 2 {
		return 0, 0, fmt.Errorf("bad size line %q", line)
	}
	nreq, err1 := strconv.Atoi(f[0])
	nresp, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil || nreq < 0 || nresp < 0 {
		return 0, 0, fmt.Errorf("bad size line %q", line)
	}
	return nreq, nresp, nil
}

// readExchange parses one request and its response. Each must take up
// its bytes exactly.
func readExchange(rawReq, rawResp []byte) (*exchange, error) {
	br := bufio.NewReader(bytes.NewReader(rawReq))
	req, err := http.ReadRequest(br)
	if err != nil {
		return nil, fmt.Errorf("request: %w", err)
	}
	reqBody, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, fmt.Errorf("request body: %w", err)
	}
	req.Body = nil
	if _, err := br.Peek(1); err != io.EOF {
		return nil, errors.New("request: bytes after its body")
	}

	br = bufio.NewReader(bytes.NewReader(rawResp))
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return nil, fmt.Errorf("response: %w", err)
	}
	respBody, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("response body: %w", err)
	}
	resp.Body = nil
	if _, err := br.Peek(1); err != io.EOF {
		return nil, errors.New("response: bytes after its body")
	}
	return &exchange{
		req:      req,
		reqBody:  reqBody,
		query:    normalQuery(req.URL.RawQuery),
		resp:     resp,
		respBody: respBody,
	}, nil
}

// writeExchange appends an exchange to buf in the trace format. req and
// resp must have been scrubbed; their bodies are given as bytes and their
// Body fields are ignored.
func writeExchange(buf *bytes.Buffer, req *http.Request, reqBody []byte, resp *http.Response, respBody []byte) error {
	r := req.Clone(req.Context())
	r.Body = nil
	if len(reqBody) > 0 {
		r.Body = io.NopCloser(bytes.NewReader(reqBody))
	}
	r.ContentLength = int64(len(reqBody))
	r.TransferEncoding = nil
	r.Close = false
	var rawReq bytes.Buffer
	if err := r.WriteProxy(&rawReq); err != nil {
		return fmt.Errorf("writing the request: %w", err)
	}

	w := *resp
	w.Body = io.NopCloser(bytes.NewReader(respBody))
	w.Trailer = nil
	w.Request = r
	w.Uncompressed = false
	switch {
	case len(w.TransferEncoding) > 0:
		// Kept chunked, as it came, so that a replayed response has the
		// framing of the live one.
		w.TransferEncoding = []string{"chunked"}
		w.ContentLength = -1
	case r.Method == http.MethodHead:
		// A response to HEAD announces a length it has no body for.
	default:
		w.ContentLength = int64(len(respBody))
	}
	var rawResp bytes.Buffer
	if err := w.Write(&rawResp); err != nil {
		return fmt.Errorf("writing the response: %w", err)
	}

	fmt.Fprintf(buf, "%d %d\n", rawReq.Len(), rawResp.Len())
	buf.Write(rawReq.Bytes())
	buf.Write(rawResp.Bytes())
	return nil
}

// Exchange is one recorded request and its response, as [ReadFile] reads
// them.
type Exchange struct {
	// Request is the request as recorded, its Body nil.
	Request *http.Request
	// RequestBody is the request's body.
	RequestBody []byte
	// Response is the response as recorded, its Body nil.
	Response *http.Response
	// ResponseBody is the response's body, de-chunked.
	ResponseBody []byte
}

// ReadFile reads the exchanges of a cassette file (the httprr trace
// format), in the order they were recorded: for a test that serves
// recorded traffic its own way, such as answering whatever a client asks
// with the recorded responses in turn. An error that the file does not
// exist matches fs.ErrNotExist.
func ReadFile(path string) ([]Exchange, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	xs, err := readTrace(data)
	if err != nil {
		return nil, fmt.Errorf("cassette %s: %w", path, err)
	}
	out := make([]Exchange, len(xs))
	for i, x := range xs {
		out[i] = Exchange{Request: x.req, RequestBody: x.reqBody, Response: x.resp, ResponseBody: x.respBody}
	}
	return out, nil
}
