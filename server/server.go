package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/conversation/host"
	"github.com/calf-go/calf/eventlog"
	"github.com/calf-go/calf/internal/httperr"
	"github.com/calf-go/calf/internal/httpheader"
	"github.com/calf-go/calf/internal/lograte"
	"github.com/calf-go/calf/runner"
	"github.com/calf-go/calf/schedule"
)

// DefaultAddr is where a server listens when [Options.Addr] is empty: the
// loopback interface only.
const DefaultAddr = "127.0.0.1:8420"

// LocalUser is the user of every request to a server without tokens (one
// that listens on loopback only).
const LocalUser = "local"

// Options configure a [Server].
type Options struct {
	// Addr is where [Server.ListenAndServe] listens. Default: DefaultAddr.
	Addr string
	// Tokens maps bearer tokens to the names of the users they
	// authenticate. A request must then carry "Authorization: Bearer
	// TOKEN", and a session belongs to the user who started it: another
	// user can neither read it nor continue it. With no tokens, every
	// request is [LocalUser]'s, and the server listens on loopback only.
	Tokens map[string]string
	// MaxBodyBytes bounds a request's body. Default: 1 MiB.
	MaxBodyBytes int64
	// BodyTimeout bounds the time a request's body takes to arrive, from
	// the end of its headers: a slower one gets 408 and its connection
	// is closed. Event streams and WebSockets, whose requests have no
	// body or have had it whole, are not bounded by it. Default: 30 s.
	BodyTimeout time.Duration
	// RateLimit is how many requests a second a user may make, on
	// average, and RateBurst how many at once. Defaults: 10 and 20. A
	// negative RateLimit sets no limit.
	RateLimit float64
	RateBurst int
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// AllowedOrigins are the host patterns (path.Match syntax, such as
	// "app.example.com" or "*.example.com") of the web pages allowed to
	// open the WebSocket bridge besides the server's own origin. Default:
	// none.
	AllowedOrigins []string
	// MaxMessageBytes bounds a WebSocket message from a client; a bigger
	// one closes the connection (status 1009). Default: 64 KiB.
	MaxMessageBytes int64
	// Log is the event log of the runs ([eventlog.New], recording with
	// [eventlog.Log.Record]): the web chat, the run inspector, the
	// WebSocket bridge, AG-UI and GET /v1/runs/{id}/events read the runs'
	// events from it, and streamed answers can be resumed. Default: a log
	// in the runtime's store, its recorder subscribed by [New] on the
	// runtime's client (recorders in many processes share the work).
	Log *eventlog.Log
	// Conversations, when set, serves the conversations of this host
	// (package conversation) to the users: the API under
	// /v1/conversations, their messages and answers over the WebSocket
	// bridge, and the web chat's conversations. Each conversation belongs
	// to the user who created it. The host need not serve in this
	// process (any process on the broker may); its user-facing histories
	// are kept by [Server.RecordConversations].
	Conversations *host.Host
	// Deps, when set, gives the runs a user starts (by the API, the
	// WebSocket bridge or AG-UI) the dependencies it returns for that
	// user: the name [Options.Tokens] maps the request's token to, or
	// [LocalUser]. They travel with the run to the workers
	// ([agent.RunOptions.Deps]), where tools read them with
	// [agent.Deps.Of]: calf serve gives each user's file and bash tools a
	// directory of their own this way. Default: runs without
	// dependencies.
	Deps func(user string) agent.DepsValue
}

// runOptions returns the options of a run that user starts.
func (s *Server) runOptions(user string, o runner.Options) *runner.Options {
	if s.opts.Deps != nil {
		o.Deps = s.opts.Deps(user)
	}
	return &o
}

// Server offers agents, teams and workflows ([runner.Runner]) over HTTP:
// the OpenAI-compatible API under /v1 (see [Server.Handler]).
type Server struct {
	rt      *agent.Runtime
	runners map[string]runner.Runner
	names   []string
	opts    Options
	log     *slog.Logger
	// sched keeps the schedules of /v1/schedules and carries out their
	// firings.
	sched   *schedule.Scheduler
	started time.Time
	// outageLog lets one warning of the 503s of an outage through every
	// 10 s, with the count of those left out.
	outageLog *lograte.Limiter

	mu       sync.Mutex
	limiters map[string]*rate.Limiter
}

// New returns a server of runners on rt. Their names must be distinct; they
// are the model names of the OpenAI-compatible API. As long as rt's client
// lives, the server carries out the firings of the store's schedules
// ([schedule.Scheduler.Serve]), each once among the processes that do.
func New(rt *agent.Runtime, runners []runner.Runner, opts *Options) (*Server, error) {
	if rt == nil {
		return nil, errors.New("server: a runtime is required")
	}
	if len(runners) == 0 {
		return nil, errors.New("server: no agents to serve")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Addr == "" {
		o.Addr = DefaultAddr
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = 1 << 20
	}
	if o.BodyTimeout <= 0 {
		o.BodyTimeout = 30 * time.Second
	}
	if o.RateLimit == 0 {
		o.RateLimit = 10
	}
	if o.RateBurst <= 0 {
		o.RateBurst = 20
	}
	if o.MaxMessageBytes <= 0 {
		o.MaxMessageBytes = 64 << 10
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	for tok, user := range o.Tokens {
		if tok == "" || user == "" {
			return nil, errors.New("server: a token and its user must not be empty")
		}
	}
	s := &Server{rt: rt, runners: map[string]runner.Runner{}, opts: o, log: o.Logger, started: time.Now(), limiters: map[string]*rate.Limiter{}, outageLog: lograte.New(10 * time.Second)}
	for _, r := range runners {
		name := r.Name()
		if name == "" {
			return nil, errors.New("server: a runner has no name")
		}
		if _, dup := s.runners[name]; dup {
			return nil, fmt.Errorf("server: two runners are named %q", name)
		}
		s.runners[name] = r
		s.names = append(s.names, name)
	}
	if s.opts.Log == nil {
		// The web chat and the run inspector follow runs in their log:
		// without one given, the server records its own. The recorder
		// lives as long as the runtime's client.
		s.opts.Log = eventlog.New(rt.Client(), rt.Store())
		if err := s.opts.Log.Record(context.Background(), nil); err != nil {
			return nil, fmt.Errorf("server: record the event log: %w", err)
		}
	}
	// The schedules of the API fire whether or not a worker serves
	// schedules: this process carries out their firings too, in the group
	// of every process that does, each firing once.
	s.sched = schedule.New(rt, nil)
	if err := s.sched.Serve(context.Background()); err != nil {
		return nil, fmt.Errorf("server: serve the schedules: %w", err)
	}
	return s, nil
}

// Handler returns the server's HTTP handler:
//
//   - GET /v1/models lists the runners as models;
//   - POST /v1/chat/completions and POST /v1/responses run one, named as
//     the model, with or without streaming (server-sent events);
//   - GET /v1/runs/{id}/events streams a run's events from the event log
//     ([Options.Log]), resumable by Last-Event-ID;
//   - POST /agui/{agent} runs an agent for an AG-UI client (with
//     [Options.Log]): approvals are interrupts, answered by the next
//     request's resume entries;
//   - GET /v1/runs lists the user's runs (?agent=, ?status=, ?limit=),
//     GET /v1/runs/{id} summarizes one, GET /v1/deadletters lists the dead
//     letters of the user's runs and POST /v1/deadletters/{id}/replay
//     publishes one's message again (with [Options.Log]): the run
//     inspector's API;
//   - GET /v1/ws is the WebSocket bridge (with [Options.Log]; subprotocol
//     [WSProtocol]): runs started, followed and resumed, approvals
//     answered and runs cancelled over one connection, and conversations
//     followed and talked to;
//   - with [Options.Conversations]: POST /v1/conversations creates a
//     conversation of the user, GET /v1/conversations lists theirs,
//     GET /v1/conversations/{id} reads one (record, instances, topics and
//     the user-facing history), POST /v1/conversations/{id}/messages
//     sends the user's message to its entry instance,
//     POST /v1/conversations/{id}/stop stops it, and
//     POST /v1/conversations/{id}/instances/{instance}/restart puts a
//     failed instance (status error, with its error, in GET) back to work;
//   - with [Options.Log]: POST /v1/runs/{id}/signals/{name} sends a
//     signal to one of the user's runs, the body (JSON, or empty) its
//     value: 202 with the run, 409 for a run that has ended;
//   - GET /v1/schedules lists the user's schedules, POST /v1/schedules
//     creates one from a [ScheduleRequest], GET and DELETE
//     /v1/schedules/{name} read and remove one, and POST
//     /v1/schedules/{name}/pause, /resume and /trigger control it;
//   - GET /v1/sessions/{id}/wakeups lists the follow-ups pending in a
//     session of the user, and DELETE /v1/sessions/{id}/wakeups/{wakeup}
//     cancels one.
//
// Every request passes, in order: a check of its Host when the server has
// no tokens (a page elsewhere cannot reach a loopback server through DNS
// rebinding); the bearer token, when the server has tokens; the user's
// rate limit; its body, read whole within the body size limit and
// [Options.BodyTimeout]; and cross-origin protection (browsers'
// cross-site requests that change state are refused). A request refused
// before its body is read is answered at once, and its connection closed
// without waiting for the body.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", s.models)
	mux.HandleFunc("POST /v1/chat/completions", s.chatCompletions)
	mux.HandleFunc("POST /v1/responses", s.responses)
	if s.opts.Log != nil {
		mux.HandleFunc("GET /v1/runs/{id}/events", s.runEvents)
		mux.HandleFunc("POST /agui/{agent}", s.agui)
		mux.HandleFunc("GET /v1/ws", s.ws)
		mux.HandleFunc("GET /v1/sessions", s.sessions)
		mux.HandleFunc("GET /v1/sessions/{id}", s.session)
		mux.HandleFunc("GET /v1/runs", s.runs)
		mux.HandleFunc("GET /v1/runs/{id}", s.run)
		mux.HandleFunc("POST /v1/runs/{id}/signals/{name}", s.signalRun)
		mux.HandleFunc("GET /v1/deadletters", s.deadLetters)
		mux.HandleFunc("POST /v1/deadletters/{id}/replay", s.replayDeadLetter)
		mux.HandleFunc("GET /v1/schedules", s.listSchedules)
		mux.HandleFunc("POST /v1/schedules", s.createSchedule)
		mux.HandleFunc("GET /v1/schedules/{name}", s.getSchedule)
		mux.HandleFunc("DELETE /v1/schedules/{name}", s.deleteSchedule)
		mux.HandleFunc("POST /v1/schedules/{name}/pause", s.controlSchedule(s.sched.Pause))
		mux.HandleFunc("POST /v1/schedules/{name}/resume", s.controlSchedule(s.sched.Resume))
		mux.HandleFunc("POST /v1/schedules/{name}/trigger", s.triggerSchedule)
		mux.HandleFunc("GET /v1/sessions/{id}/wakeups", s.sessionWakeUps)
		mux.HandleFunc("DELETE /v1/sessions/{id}/wakeups/{wakeup...}", s.cancelWakeUp)
	}
	if s.opts.Conversations != nil {
		mux.HandleFunc("POST /v1/conversations", s.createConversation)
		mux.HandleFunc("GET /v1/conversations", s.listConversations)
		mux.HandleFunc("GET /v1/conversations/{id}", s.getConversation)
		mux.HandleFunc("POST /v1/conversations/{id}/messages", s.postConversationMessage)
		mux.HandleFunc("POST /v1/conversations/{id}/stop", s.stopConversation)
		mux.HandleFunc("POST /v1/conversations/{id}/instances/{instance}/restart", s.restartInstance)
	}
	allowed := map[string]string{"/v1/models": "GET", "/v1/chat/completions": "POST", "/v1/responses": "POST", "/v1/sessions": "GET", "/v1/ws": "GET", "/v1/runs": "GET", "/v1/deadletters": "GET", "/v1/schedules": "GET, POST"}
	if s.opts.Conversations != nil {
		allowed["/v1/conversations"] = "GET, POST"
	}
	mux.HandleFunc("/v1/", func(w http.ResponseWriter, r *http.Request) {
		if method, ok := allowed[r.URL.Path]; ok {
			w.Header().Set("Allow", method)
			httperr.Write(w, fmt.Errorf("%w: %s takes %s, not %s", httperr.ErrMethodNotAllowed, r.URL.Path, method, r.Method))
			return
		}
		httperr.Write(w, notFound(fmt.Sprintf("no endpoint %s %s", r.Method, r.URL.Path)))
	})
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		httperr.Write(w, &httperr.Error{Kind: httperr.ErrForbidden, Code: "cross_origin", Message: "cross-origin request refused"})
	}))
	api := s.bodyDeadline(s.guard(cop.Handler(mux)))
	if s.opts.Log == nil {
		return api
	}
	// The web page: static files, public (they hold no data; the page asks
	// for the token), the API behind the guard.
	root := http.NewServeMux()
	root.Handle("/v1/", api)
	root.Handle("/agui/", api)
	root.Handle("/", s.bodyDeadline(webHandler()))
	return root
}

// userKey carries the authenticated user in a request's context.
type userKey struct{}

// userOf returns the user of a request that passed the guard.
func userOf(r *http.Request) string {
	u, _ := r.Context().Value(userKey{}).(string)
	return u
}

// bodyDeadline bounds the time the body of a request that has one takes
// to arrive ([Options.BodyTimeout]): reading it fails after that, and so
// does the server's own reading of a body a handler left unread.
func (s *Server) bodyDeadline(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength != 0 {
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.opts.BodyTimeout))
		}
		next.ServeHTTP(w, r)
	})
}

// dropBody makes the answer to r, whose body is not read (or not whole),
// close the connection at once, without waiting for the rest of the body.
func dropBody(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength == 0 {
		return
	}
	w.Header().Set("Connection", "close")
	_ = http.NewResponseController(w).SetReadDeadline(time.Now())
}

// guard checks the host, the token and the rate of a request, before
// anything of its body is read, then reads its body, bounded in size and
// in time, and puts its user in its context.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user := LocalUser
		if len(s.opts.Tokens) == 0 {
			if !loopbackHost(r.Host) {
				dropBody(w, r)
				httperr.Write(w, &httperr.Error{Kind: httperr.ErrForbidden, Code: "host", Message: "this server answers requests to a loopback host only (it has no tokens)"})
				return
			}
		} else {
			user = ""
			for tok, u := range s.opts.Tokens {
				if httpheader.Bearer(r, tok) || wsBearer(r, tok) {
					user = u
				}
			}
			if user == "" {
				dropBody(w, r)
				httperr.Write(w, fmt.Errorf("%w: missing or wrong bearer token", httperr.ErrUnauthorized))
				return
			}
		}
		if l := s.limiter(user); l != nil && !l.Allow() {
			dropBody(w, r)
			httperr.Write(w, &httperr.Error{Kind: httperr.ErrTooManyRequests, Message: "too many requests: slow down", RetryAfter: time.Second})
			return
		}
		if r.ContentLength != 0 {
			// The whole body now, within its bounds; then no deadline, for
			// the answer's stream.
			data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes))
			if err != nil {
				s.bodyError(w, r, err)
				return
			}
			_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
			r.Body = io.NopCloser(bytes.NewReader(data))
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), userKey{}, user)))
	})
}

// bodyError answers a request whose body could not be read, and closes
// its connection.
func (s *Server) bodyError(w http.ResponseWriter, r *http.Request, err error) {
	dropBody(w, r)
	// The causes are the client's connection's, never an outage of the
	// server's own services: they are reported with %v, not wrapped.
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		err = tooBig
	case errors.Is(err, os.ErrDeadlineExceeded):
		err = fmt.Errorf("%w: the request body did not arrive within %s", httperr.ErrRequestTimeout, s.opts.BodyTimeout)
	default:
		err = fmt.Errorf("%w: the request body could not be read: %v", errBadRequest, err)
	}
	httperr.Write(w, err)
}

// limiter returns the rate limiter of user, or nil when there is no limit.
func (s *Server) limiter(user string) *rate.Limiter {
	if s.opts.RateLimit < 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.limiters[user]
	if l == nil {
		l = rate.NewLimiter(rate.Limit(s.opts.RateLimit), s.opts.RateBurst)
		s.limiters[user] = l
	}
	return l
}

// loopbackHost reports whether host (a Host header, with or without a
// port) names the loopback interface.
func loopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// CheckAddr returns an error when addr is beyond loopback and there are
// no tokens: such a server would answer anybody.
func CheckAddr(addr string, tokens map[string]string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("server: address %q: %w", addr, err)
	}
	if !loopbackHost(host) && len(tokens) == 0 {
		return fmt.Errorf("server: %s listens beyond loopback: give bearer tokens (Options.Tokens)", addr)
	}
	return nil
}

// ParseTokens turns entries of TOKEN (user "default") or USER:TOKEN, as
// given on a command line, into [Options.Tokens]. Empty entries are
// skipped; a token shorter than 16 characters, or one given to two users,
// is an error.
func ParseTokens(entries []string) (map[string]string, error) {
	tokens := map[string]string{}
	for _, e := range entries {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		user, tok, ok := strings.Cut(e, ":")
		if !ok {
			user, tok = "default", e
		}
		if user == "" || tok == "" {
			return nil, fmt.Errorf("token %q: give TOKEN or USER:TOKEN", e)
		}
		if len(tok) < 16 {
			return nil, fmt.Errorf("a token of user %s has %d characters: use at least 16", user, len(tok))
		}
		if other, dup := tokens[tok]; dup && other != user {
			return nil, fmt.Errorf("users %s and %s have the same token", other, user)
		}
		tokens[tok] = user
	}
	return tokens, nil
}

// ListenAndServe listens on the server's address and serves until ctx
// ends, then shuts down, giving requests in progress 10 seconds.
func (s *Server) ListenAndServe(ctx context.Context) error {
	if err := CheckAddr(s.opts.Addr, s.opts.Tokens); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", s.opts.Addr)
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	return s.Serve(ctx, ln)
}

// Serve serves on ln until ctx ends; see [Server.ListenAndServe]. It
// refuses a listener beyond loopback when the server has no tokens.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	if err := CheckAddr(ln.Addr().String(), s.opts.Tokens); err != nil {
		ln.Close()
		return err
	}
	hs := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		hs.Close()
	}
	<-done
	return nil
}
