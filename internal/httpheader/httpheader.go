package httpheader

import (
	"crypto/subtle"
	"net/http"
)

// Client returns a copy of hc (http.DefaultClient's settings when nil)
// that adds h to every request. With no headers it returns hc, or a new
// client.
func Client(hc *http.Client, h http.Header) *http.Client {
	if hc == nil {
		hc = &http.Client{}
	}
	if len(h) == 0 {
		return hc
	}
	cp := *hc
	base := cp.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	cp.Transport = transport{base: base, h: h.Clone()}
	return &cp
}

type transport struct {
	base http.RoundTripper
	h    http.Header
}

func (t transport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, vs := range t.h {
		r.Header[k] = append([]string(nil), vs...)
	}
	return t.base.RoundTrip(r)
}

// Bearer reports whether r carries "Authorization: Bearer token", compared
// in constant time. An empty token never matches.
func Bearer(r *http.Request, token string) bool {
	got := []byte(r.Header.Get("Authorization"))
	return token != "" && subtle.ConstantTimeCompare(got, []byte("Bearer "+token)) == 1
}
