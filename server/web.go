package server

import (
	"embed"
	"fmt"
	"io/fs"
	"net/http"

	"github.com/calf-go/calf/internal/httperr"
)

// web holds the web chat: a page and its script, with no dependency and
// nothing to build.
//
//go:embed web
var web embed.FS

// webHandler serves the web chat's files, with a content security policy
// that lets the page load nothing but them and talk to nothing but this
// server.
func webHandler() http.Handler {
	sub, _ := fs.Sub(web, "web")
	files := http.FileServerFS(sub)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			httperr.Write(w, fmt.Errorf("%w: %s takes GET or HEAD, not %s", httperr.ErrMethodNotAllowed, r.URL.Path, r.Method))
			return
		}
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; connect-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		files.ServeHTTP(w, r)
	})
}
