package cassette

import (
	"bytes"
	"io"
	"net/http"
	"net/textproto"
	"net/url"
	"slices"
	"strings"
)

// Redacted is what a cassette file holds in place of a credential (see
// Scrubbing in the package documentation). A scrubber of
// [Options.Scrub] or [Options.ScrubResponse] may use it too.
const Redacted = "REDACTED"

// credentialHeaders are the headers whose values are replaced by
// Redacted before a request or a response is written, in canonical
// form. They are found whatever their case.
var credentialHeaders = []string{
	"Authorization",
	"Proxy-Authorization",
	"X-Api-Key",
	"Api-Key",
	"X-Goog-Api-Key",
	"Cookie",
	"Set-Cookie",
}

// credentialParams are the URL query parameters whose values are
// replaced by Redacted before a request is written. Replay ignores them
// when it matches a request.
var credentialParams = []string{"key"}

// scrubHeader replaces the values of the credential headers of h in
// place. Keys that are not in canonical form are found too.
func scrubHeader(h http.Header) {
	for k := range h {
		if slices.Contains(credentialHeaders, textproto.CanonicalMIMEHeaderKey(k)) {
			h[k] = []string{Redacted}
		}
	}
}

// scrubQuery returns rawQuery with the values of the credential
// parameters replaced, the other parameters left as written.
func scrubQuery(rawQuery string) string {
	if rawQuery == "" {
		return ""
	}
	parts := strings.Split(rawQuery, "&")
	for i, p := range parts {
		k, _, _ := strings.Cut(p, "=")
		if uk, err := url.QueryUnescape(k); err == nil && slices.Contains(credentialParams, uk) {
			parts[i] = k + "=" + Redacted
		}
	}
	return strings.Join(parts, "&")
}

// scrubRequest returns a copy of req with body as its body, scrubbed of
// credentials and then by the user's scrubber, and the body the copy
// ends with. req is not changed.
func scrubRequest(req *http.Request, body []byte, user func(*http.Request) error) (*http.Request, []byte, error) {
	r := req.Clone(req.Context())
	r.URL.User = nil
	r.URL.RawQuery = scrubQuery(r.URL.RawQuery)
	r.URL.ForceQuery = false
	scrubHeader(r.Header)
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	r.GetBody = nil
	if user == nil {
		return r, body, nil
	}
	if err := user(r); err != nil {
		return nil, nil, err
	}
	body, err := readAll(r.Body)
	if err != nil {
		return nil, nil, err
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	return r, body, nil
}

// scrubResponse returns a copy of resp scrubbed of credentials and then
// by the user's scrubber, and the body the copy ends with. resp is not
// changed.
func scrubResponse(resp *http.Response, body []byte, user func(*http.Response) error) (*http.Response, []byte, error) {
	r := *resp
	r.Header = resp.Header.Clone()
	if r.Header == nil {
		r.Header = http.Header{}
	}
	scrubHeader(r.Header)
	r.Body = io.NopCloser(bytes.NewReader(body))
	if user == nil {
		return &r, body, nil
	}
	if err := user(&r); err != nil {
		return nil, nil, err
	}
	body, err := readAll(r.Body)
	if err != nil {
		return nil, nil, err
	}
	return &r, body, nil
}

// readAll reads and closes body, which may be nil.
func readAll(body io.ReadCloser) ([]byte, error) {
	if body == nil {
		return nil, nil
	}
	defer body.Close()
	return io.ReadAll(body)
}
