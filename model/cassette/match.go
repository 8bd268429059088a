package cassette

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/google/go-cmp/cmp"
)

// EqualBody reports whether two request bodies are the same: when both
// are JSON, after decoding, so that the order of object keys and the
// white space do not count; otherwise byte for byte. It is what replay
// compares bodies with unless [Options.Match] says otherwise.
func EqualBody(recorded, sent []byte) bool {
	if bytes.Equal(recorded, sent) {
		return true
	}
	a, okA := decodeJSON(recorded)
	b, okB := decodeJSON(sent)
	return okA && okB && reflect.DeepEqual(a, b)
}

// decodeJSON decodes data if it holds one JSON value and nothing else.
// Numbers stay as written (json.Number), so large integers keep their
// digits.
func decodeJSON(data []byte) (any, bool) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false
	}
	return v, true
}

// normalQuery returns the parameters of a raw query as replay compares
// them: unescaped "name=value" pairs sorted by name, the credential
// parameters left out.
func normalQuery(rawQuery string) []string {
	var params []string
	for p := range strings.SplitSeq(rawQuery, "&") {
		if p == "" {
			continue
		}
		k, v, _ := strings.Cut(p, "=")
		if uk, err := url.QueryUnescape(k); err == nil {
			k = uk
		}
		if slices.Contains(credentialParams, k) {
			continue
		}
		if uv, err := url.QueryUnescape(v); err == nil {
			v = uv
		}
		params = append(params, k+"="+v)
	}
	slices.SortStableFunc(params, func(a, b string) int {
		ka, _, _ := strings.Cut(a, "=")
		kb, _, _ := strings.Cut(b, "=")
		return strings.Compare(ka, kb)
	})
	return params
}

// matches reports whether the recorded exchange x answers a request
// with this method, URL, compared query and body.
func (x *exchange) matches(method string, u *url.URL, query []string, body []byte, match func(recorded, sent []byte) bool) bool {
	return x.req.Method == method &&
		x.req.URL.Path == u.Path &&
		slices.Equal(x.query, query) &&
		match(x.reqBody, body)
}

// request is a request as a mismatch shows it.
type request struct {
	Method string
	Path   string
	Query  []string
	Body   any // decoded JSON, else the text
}

func viewOf(method string, u *url.URL, query []string, body []byte) request {
	v := request{Method: method, Path: u.Path, Query: query}
	if b, ok := decodeJSON(body); ok {
		v.Body = plainNumbers(b)
	} else {
		v.Body = string(body)
	}
	return v
}

// plainNumbers replaces in decoded JSON each json.Number that a float64
// holds exactly by that float64, which a diff shows more plainly.
func plainNumbers(v any) any {
	switch v := v.(type) {
	case json.Number:
		if f, err := strconv.ParseFloat(string(v), 64); err == nil && strconv.FormatFloat(f, 'g', -1, 64) == string(v) {
			return f
		}
	case map[string]any:
		for k, e := range v {
			v[k] = plainNumbers(e)
		}
	case []any:
		for i, e := range v {
			v[i] = plainNumbers(e)
		}
	}
	return v
}

// MismatchError is returned, wrapped in a *url.Error by an
// [http.Client], when replay finds no unused recorded exchange that
// matches a request.
type MismatchError struct {
	// File is the cassette's file.
	File string
	// Method and URL are the request's.
	Method, URL string
	// Nearest is the number (from 1, in file order) of the recorded
	// exchange the request was compared with: the first unused one with
	// the same method and path, else the first unused one. It is 0 when
	// every recorded exchange has been used.
	Nearest int
	// Diff shows how the nearest recorded request (-) and the request
	// sent (+) differ, in their method, path, query and body.
	Diff string
	// hint says how to record the cassette again.
	hint string
}

// Error names the file and the request, shows the diff against the
// nearest recorded request and says how to record again.
func (e *MismatchError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "cassette: %s: no recorded exchange matches %s %s", e.File, e.Method, e.URL)
	if e.Nearest == 0 {
		b.WriteString(" (every recorded exchange has been used)")
	} else {
		fmt.Fprintf(&b, "; nearest is exchange %d (-recorded +sent):\n%s", e.Nearest, e.Diff)
		if e.Diff == "" {
			b.WriteString("\t(the bodies differ only as Options.Match compares them)")
		}
	}
	if e.hint != "" {
		fmt.Fprintf(&b, "\nto record it again: %s", e.hint)
	}
	return b.String()
}

// mismatch builds the error for a request no unused exchange matches.
// The caller holds c.mu.
func (c *Cassette) mismatch(req *http.Request, query []string, body []byte) *MismatchError {
	e := &MismatchError{File: c.path, Method: req.Method, URL: req.URL.Redacted(), hint: c.hint}
	nearest := -1
	for i, x := range c.exchanges {
		if c.used[i] {
			continue
		}
		if nearest < 0 {
			nearest = i
		}
		if x.req.Method == req.Method && x.req.URL.Path == req.URL.Path {
			nearest = i
			break
		}
	}
	if nearest < 0 {
		return e
	}
	x := c.exchanges[nearest]
	e.Nearest = nearest + 1
	e.Diff = cmp.Diff(
		viewOf(x.req.Method, x.req.URL, x.query, x.reqBody),
		viewOf(req.Method, req.URL, query, body),
	)
	return e
}
