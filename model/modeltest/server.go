package modeltest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/calf-go/calf/model"
)

// ServerHandler answers one chat completion request of a [Server]. Its ctx
// is done when the client goes away or the server closes; a handler that
// blocks until then simulates a model that never answers. An error that is
// a *[model.StatusError] is sent with its status code; any other error as
// HTTP 500. [RequestedModel] returns the model name the client asked for.
//
// The Generate method of any [model.Model], such as a [TestModel], is a
// ServerHandler.
type ServerHandler func(ctx context.Context, req *model.Request) (*model.Response, error)

// ServerOptions configures a [Server]. The zero value is ready to use.
type ServerOptions struct {
	// APIKey, when set, is the key clients must send as
	// "Authorization: Bearer <key>"; others get HTTP 401. By default any
	// request is accepted.
	APIKey string
	// Models lists the model ids GET /v1/models returns. Default: "test".
	Models []string
	// RetryAfter, when positive, is sent as the Retry-After-Ms header of the
	// failures that [Server.FailNext] injects, which makes clients that
	// honour it retry after that delay instead of their own backoff.
	RetryAfter time.Duration
	// Embedder answers POST /v1/embeddings. Default: a [HashEmbedder].
	Embedder model.Embedder
}

// Server is an in-process fake of an OpenAI-compatible HTTP server. It
// serves POST /v1/chat/completions, plain or streamed as server-sent
// events, by decoding the request into a [model.Request] and encoding what
// its [ServerHandler] answers; POST /v1/embeddings, with its
// [ServerOptions.Embedder]; and GET /v1/models. It adds no latency of
// its own and logs nothing, so it also serves as the floor of benchmarks.
type Server struct {
	handler ServerHandler
	opts    ServerOptions
	srv     *httptest.Server
	cancel  context.CancelFunc

	requests atomic.Int64
	ids      atomic.Int64

	mu         sync.Mutex
	failLeft   int
	failStatus int
}

type requestedModelKey struct{}

// RequestedModel returns the model name of the request a [ServerHandler]
// is serving, or "" outside a handler.
func RequestedModel(ctx context.Context) string {
	s, _ := ctx.Value(requestedModelKey{}).(string)
	return s
}

// NewServer starts a server that answers chat completions with h. A nil h
// answers every request with the text of its last user message. Close the
// server when done.
func NewServer(h ServerHandler) *Server {
	return NewServerWithOptions(h, nil)
}

// NewServerWithOptions starts a server configured by opts; nil opts means
// the defaults. Close the server when done.
func NewServerWithOptions(h ServerHandler, opts *ServerOptions) *Server {
	s := &Server{handler: h}
	if opts != nil {
		s.opts = *opts
	}
	if s.handler == nil {
		s.handler = echo
	}
	if len(s.opts.Models) == 0 {
		s.opts.Models = []string{"test"}
	}
	if s.opts.Embedder == nil {
		s.opts.Embedder = HashEmbedder{}
	}
	base, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", s.chatCompletions)
	mux.HandleFunc("GET /v1/models", s.models)
	mux.HandleFunc("POST /v1/embeddings", s.embeddings)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "invalid_request_error", fmt.Sprintf("no route for %s %s", r.Method, r.URL.Path))
	})
	s.srv = httptest.NewUnstartedServer(s.authenticate(mux))
	s.srv.Config.BaseContext = func(net.Listener) context.Context { return base }
	s.srv.Start()
	return s
}

// echo answers with the text of the last user message.
func echo(_ context.Context, req *model.Request) (*model.Response, error) {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == model.RoleUser {
			return Text(req.Messages[i].Text()), nil
		}
	}
	return Text(""), nil
}

// URL returns the base URL of the API, ending in /v1.
func (s *Server) URL() string { return s.srv.URL + "/v1" }

// Close stops the server. Handlers still running see their ctx done.
func (s *Server) Close() {
	s.cancel()
	s.srv.CloseClientConnections()
	s.srv.Close()
}

// Requests returns the number of chat completion requests received so
// far, including those that failed.
func (s *Server) Requests() int { return int(s.requests.Load()) }

// FailNext makes the next n chat completion requests fail with the HTTP
// status code status and an OpenAI-style error body, without calling the
// handler.
func (s *Server) FailNext(n int, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failLeft, s.failStatus = n, status
}

// takeFailure reports the status with which the current request must fail,
// or 0.
func (s *Server) takeFailure() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failLeft <= 0 {
		return 0
	}
	s.failLeft--
	return s.failStatus
}

func (s *Server) authenticate(next http.Handler) http.Handler {
	if s.opts.APIKey == "" {
		return next
	}
	want := "Bearer " + s.opts.APIKey
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != want {
			writeError(w, http.StatusUnauthorized, "invalid_request_error", "Incorrect API key provided.")
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request) {
	s.requests.Add(1)
	if status := s.takeFailure(); status != 0 {
		if s.opts.RetryAfter > 0 {
			w.Header().Set("Retry-After-Ms", strconv.FormatInt(s.opts.RetryAfter.Milliseconds(), 10))
		}
		writeError(w, status, errorType(status), "injected failure: "+http.StatusText(status))
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "reading body: "+err.Error())
		return
	}
	wreq, req, err := decodeRequest(body)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
		return
	}
	ctx := context.WithValue(r.Context(), requestedModelKey{}, wreq.Model)
	resp, err := s.handler(ctx, req)
	if err != nil {
		if ctx.Err() != nil {
			// The client is gone or the server is closing: drop the
			// connection rather than answer.
			panic(http.ErrAbortHandler)
		}
		var se *model.StatusError
		if errors.As(err, &se) {
			writeError(w, se.StatusCode, errorType(se.StatusCode), se.Message)
			return
		}
		writeError(w, http.StatusInternalServerError, "server_error", err.Error())
		return
	}
	if resp == nil {
		writeError(w, http.StatusInternalServerError, "server_error", "modeltest: handler returned no response")
		return
	}
	id := resp.ID
	if id == "" {
		id = "chatcmpl-test-" + strconv.FormatInt(s.ids.Add(1), 10)
	}
	modelName := resp.Model
	if modelName == "" {
		modelName = wreq.Model
	}
	created := time.Now().Unix()
	if !wreq.Stream {
		writeJSON(w, http.StatusOK, encodeCompletion(id, modelName, created, resp))
		return
	}
	includeUsage := wreq.StreamOptions != nil && wreq.StreamOptions.IncludeUsage
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for _, c := range encodeChunks(id, modelName, created, resp, includeUsage) {
		buf.WriteString("data: ")
		if err := enc.Encode(c); err != nil {
			writeError(w, http.StatusInternalServerError, "server_error", err.Error())
			return
		}
		buf.WriteString("\n")
	}
	buf.WriteString("data: [DONE]\n\n")
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(buf.Bytes())
}

func (s *Server) models(w http.ResponseWriter, _ *http.Request) {
	type entry struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	list := struct {
		Object string  `json:"object"`
		Data   []entry `json:"data"`
	}{Object: "list", Data: []entry{}}
	for _, m := range s.opts.Models {
		list.Data = append(list.Data, entry{ID: m, Object: "model", OwnedBy: "modeltest"})
	}
	writeJSON(w, http.StatusOK, list)
}

// errorType returns the OpenAI error type for an HTTP status code.
func errorType(status int) string {
	switch {
	case status == http.StatusTooManyRequests:
		return "rate_limit_error"
	case status >= 500:
		return "server_error"
	default:
		return "invalid_request_error"
	}
}

func writeError(w http.ResponseWriter, status int, typ, msg string) {
	writeJSON(w, status, wireError{Error: wireErrorBody{Message: msg, Type: typ}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"message":"modeltest: encoding the response failed","type":"server_error"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
