package a2a

import (
	"crypto/subtle"
	"net/http"
)

// bearer reports whether r carries "Authorization: Bearer token",
// compared in constant time.
func bearer(r *http.Request, token string) bool {
	got := []byte(r.Header.Get("Authorization"))
	return token != "" && subtle.ConstantTimeCompare(got, []byte("Bearer "+token)) == 1
}
