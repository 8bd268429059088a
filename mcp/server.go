package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/internal/httperr"
	"github.com/calf-go/calf/internal/httpheader"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/runner"
	"github.com/calf-go/calf/tool"
)

// Server offers Calf tools, and agents, teams and workflows as tools, to
// MCP clients, over stdio ([Server.ServeStdio]) or streamable HTTP
// ([Server.Handler]). It is built on the official SDK's server, which
// [Server.SDK] returns for what Calf does not model (resources, prompts).
type Server struct {
	sdk *sdk.Server
	rt  *agent.Runtime
	log *slog.Logger

	mu    sync.Mutex
	names map[string]bool
}

// ServerOptions configure a [Server]. A nil *ServerOptions means the
// defaults.
type ServerOptions struct {
	// Name and Version are what the server says of itself. Default:
	// "calf", "1".
	Name, Version string
	// Instructions tell clients how to use the server.
	Instructions string
	// Logger receives the server's diagnostics. Default: none.
	Logger *slog.Logger
	// SDK are options of the underlying SDK server, for what Calf does
	// not model: completions, resource subscriptions, and the like. Its
	// Instructions and Logger give way to the fields above when set.
	SDK *sdk.ServerOptions
}

// NewServer returns a server whose agents, teams and workflows run on rt
// (nil when it offers only plain tools).
func NewServer(rt *agent.Runtime, opts *ServerOptions) *Server {
	var o ServerOptions
	if opts != nil {
		o = *opts
	}
	if o.Name == "" {
		o.Name = "calf"
	}
	if o.Version == "" {
		o.Version = version
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	var so sdk.ServerOptions
	if o.SDK != nil {
		so = *o.SDK
	}
	if o.Instructions != "" {
		so.Instructions = o.Instructions
	}
	if so.Logger == nil || (opts != nil && opts.Logger != nil) {
		so.Logger = o.Logger
	}
	// Advertise tools before any is added; keep the rest as the SDK infers
	// it. Logging, deprecated by the protocol, is offered only when
	// ServerOptions.SDK.Capabilities asks for it.
	caps := &sdk.ServerCapabilities{}
	if so.Capabilities != nil {
		c := *so.Capabilities
		caps = &c
	}
	if caps.Tools == nil {
		caps.Tools = &sdk.ToolCapabilities{ListChanged: true}
	}
	so.Capabilities = caps
	s := sdk.NewServer(&sdk.Implementation{Name: o.Name, Version: o.Version}, &so)
	return &Server{sdk: s, rt: rt, log: o.Logger, names: map[string]bool{}}
}

// SDK returns the underlying server of the official SDK, to add resources,
// prompts or tools of its own.
func (s *Server) SDK() *sdk.Server { return s.sdk }

func (s *Server) claim(name string) error {
	if err := tool.CheckName(name); err != nil {
		return fmt.Errorf("mcp: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.names[name] {
		return fmt.Errorf("mcp: the server has a tool named %q already", name)
	}
	s.names[name] = true
	return nil
}

// AddTool offers t. A call runs t in this process, as a function: it is
// not an agent's run. t's arguments are validated as for an agent; an
// error it returns is a result with isError set, as MCP wants tool errors
// reported. t's kind becomes its annotations (read: read-only; edit: not
// destructive; network: open world; execute: destructive).
func (s *Server) AddTool(t tool.Tool) error {
	def := t.Definition()
	if err := s.claim(def.Name); err != nil {
		return err
	}
	s.sdk.AddTool(mcpTool(def, tool.KindOf(t)), func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		ctx = context.WithValue(ctx, requestKey{}, req)
		res, err := t.Call(ctx, req.Params.Arguments)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return errorResult(err), nil
		}
		return toMCP(res), nil
	})
	return nil
}

// mcpTool describes a Calf tool to MCP clients.
func mcpTool(def model.ToolDefinition, kind tool.Kind) *sdk.Tool {
	schema := def.Parameters
	if len(schema) == 0 {
		schema = json.RawMessage(`{"type":"object"}`)
	}
	f, tr := false, true
	a := &sdk.ToolAnnotations{}
	switch kind {
	case tool.KindRead:
		a.ReadOnlyHint, a.OpenWorldHint = true, &f
	case tool.KindEdit:
		a.DestructiveHint, a.OpenWorldHint = &f, &f
	case tool.KindNetwork:
		a.OpenWorldHint = &tr
	default:
		a.DestructiveHint = &tr
	}
	return &sdk.Tool{Name: def.Name, Description: def.Description, InputSchema: schema, Annotations: a}
}

func errorResult(err error) *sdk.CallToolResult {
	return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: err.Error()}}}
}

// toMCP converts a Calf tool result.
func toMCP(r *tool.Result) *sdk.CallToolResult {
	out := &sdk.CallToolResult{IsError: r.IsError, Content: []sdk.Content{}}
	for _, p := range r.Parts {
		switch p.Type {
		case model.PartImage:
			if len(p.Data) > 0 {
				out.Content = append(out.Content, &sdk.ImageContent{Data: p.Data, MIMEType: p.MIMEType})
			} else {
				out.Content = append(out.Content, &sdk.ResourceLink{URI: p.URL, Name: "image"})
			}
		default:
			out.Content = append(out.Content, &sdk.TextContent{Text: p.Text})
		}
	}
	if len(r.Structured) > 0 {
		out.StructuredContent = json.RawMessage(r.Structured)
		if len(out.Content) == 0 {
			out.Content = append(out.Content, &sdk.TextContent{Text: string(r.Structured)})
		}
	}
	return out
}

type requestKey struct{}

// Request returns the MCP request of the tool call that ctx belongs to, in
// a tool offered with [Server.AddTool] (nil elsewhere): its session lets
// the tool log to the client, ask it for a sampling or an elicitation,
// and its params hold the progress token.
func Request(ctx context.Context) *sdk.CallToolRequest {
	req, _ := ctx.Value(requestKey{}).(*sdk.CallToolRequest)
	return req
}

// Progress reports the progress of the MCP tool call that ctx belongs to,
// to a client that asked for it (a progress token in the call); it does
// nothing otherwise. total is 0 when unknown. A tool offered with
// [Server.AddTool] calls it with the ctx it was given.
func Progress(ctx context.Context, progress, total float64, message string) error {
	req := Request(ctx)
	if req == nil || req.Session == nil {
		return nil
	}
	token := req.Params.GetProgressToken()
	if token == nil {
		return nil
	}
	return req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: token, Progress: progress, Total: total, Message: message})
}

var promptSchema = json.RawMessage(`{"type":"object","properties":{"prompt":{"type":"string",` +
	`"description":"The task, with everything needed to carry it out."}},"required":["prompt"],"additionalProperties":false}`)

// AddRunner offers r (an agent, team or workflow: [runner.Agent],
// [runner.Team], [runner.Workflow]) as a tool that takes {"prompt":
// "..."}. Each call is a run of r on the server's runtime: events on the
// broker, carried out by any worker that serves r, durable and observable
// like any run. The run's events are sent as progress notifications to a
// client that asks for them; a client that cancels the call cancels the
// run. A run that fails, is cancelled or stops to wait (paused,
// interrupted, waiting for an approval) is a result with isError set that
// says so and names the run. A call whose _meta has an idempotency key
// ([IdempotencyKeyMeta]) is answered, when sent again, by the run it
// started.
func (s *Server) AddRunner(r runner.Runner) error {
	if s.rt == nil {
		return errors.New("mcp: the server has no runtime to run agents on")
	}
	if err := s.claim(r.Name()); err != nil {
		return err
	}
	t := &sdk.Tool{Name: r.Name(), Description: r.Description(), InputSchema: promptSchema,
		Annotations: &sdk.ToolAnnotations{DestructiveHint: ptr(true)}}
	s.sdk.AddTool(t, func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		var in struct {
			Prompt *string `json:"prompt"`
		}
		if err := json.Unmarshal(req.Params.Arguments, &in); err != nil || in.Prompt == nil {
			return errorResult(fmt.Errorf("invalid arguments for tool %q: want {\"prompt\": \"...\"}", r.Name())), nil
		}
		ctx = context.WithValue(ctx, requestKey{}, req)
		opts, err := s.keyed(ctx, r, req, *in.Prompt)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return errorResult(err), nil
		}
		n := 0.0
		var res *runner.Result
		if opts != nil {
			// A call sent again whose run has ended: its answer, at once.
			if res, err = r.Status(ctx, s.rt, opts.RunID); err != nil || !res.Status.Ended() {
				res = nil
			}
		}
		if res == nil {
			res, err = r.Run(ctx, s.rt, *in.Prompt, opts, func(p runner.Progress) {
				if p.Message == "" {
					return
				}
				n++
				if err := Progress(ctx, n, 0, p.Message); err != nil && ctx.Err() == nil {
					s.log.Debug("mcp: progress", "tool", r.Name(), "err", err)
				}
			})
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return errorResult(err), nil
		}
		switch res.Status {
		case runner.Complete:
			return toMCP(&tool.Result{Parts: []model.Part{model.TextPart(res.Text)}, Structured: res.Structured}), nil
		case runner.Waiting:
			return errorResult(fmt.Errorf("run %s of %s waits (paused, interrupted, or for an approval)", res.RunID, r.Name())), nil
		}
		return errorResult(fmt.Errorf("run %s of %s %s: %s", res.RunID, r.Name(), res.Status, res.Error)), nil
	})
	return nil
}

// IdempotencyKeyMeta is the key, in the _meta of a tools/call request,
// of the client's idempotency key for a call of an agent, team or
// workflow ([Server.AddRunner]), a string: the same call (the same
// arguments) under the same key, within the runtime's
// [agent.RuntimeOptions.IdempotencyWindow] (from any process, after
// restarts), is answered by the run the first one started, not a second
// run; another call under a key in use is a tool error (isError) that
// says the key was used with another request. The protocol names no key
// of its own for this; keys under "calf/" are Calf's.
const IdempotencyKeyMeta = "calf/idempotencyKey"

// keyed returns the options of the run of a call of r with prompt: under
// the call's idempotency key, the run that the key names.
func (s *Server) keyed(ctx context.Context, r runner.Runner, req *sdk.CallToolRequest, prompt string) (*runner.Options, error) {
	v, ok := req.Params.GetMeta()[IdempotencyKeyMeta]
	if !ok {
		return nil, nil
	}
	key, ok := v.(string)
	if !ok || key == "" {
		return nil, fmt.Errorf("_meta %q of a call of %q is the idempotency key, a string that is not empty, not %v", IdempotencyKeyMeta, r.Name(), v)
	}
	run, err := s.rt.RunForKey(ctx, "mcp/"+r.Name(), key, struct {
		Prompt string `json:"prompt"`
	}{prompt}, "")
	if err != nil {
		return nil, fmt.Errorf("tool %s: %w", r.Name(), err)
	}
	return &runner.Options{RunID: run}, nil
}

func ptr[T any](v T) *T { return &v }

// BearerToken wraps h so that a request must carry "Authorization: Bearer
// token" (compared in constant time); others get 401 with
// WWW-Authenticate and a JSON error body, as the server package answers
// (one table of error answers, internal/httperr). Use it for a
// server that listens beyond the loopback interface.
func BearerToken(h http.Handler, token string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !httpheader.Bearer(r, token) {
			httperr.Write(w, fmt.Errorf("%w: missing or wrong bearer token", httperr.ErrUnauthorized))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// HTTPOptions configure [Server.Handler].
type HTTPOptions struct {
	// MaxBodyBytes bounds a request's body. Default: 4 MiB.
	MaxBodyBytes int64
	// Stateless serves each request on its own (no Mcp-Session-Id), for a
	// server behind a load balancer without affinity.
	Stateless bool
}

// Handler returns the streamable HTTP handler of the server. It refuses
// cross-origin browser requests, and requests that reach a loopback
// address with a Host that is not (DNS rebinding). Wrap it in
// [BearerToken] when it listens elsewhere than on loopback.
func (s *Server) Handler(opts *HTTPOptions) http.Handler {
	var o HTTPOptions
	if opts != nil {
		o = *opts
	}
	return sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s.sdk }, &sdk.StreamableHTTPOptions{
		Stateless:             o.Stateless,
		Logger:                s.log,
		MaxRequestBodyBytes:   o.MaxBodyBytes,
		CrossOriginProtection: http.NewCrossOriginProtection(),
	})
}

// ServeStdio serves one client on this process's standard input and
// output until the client disconnects or ctx ends.
func (s *Server) ServeStdio(ctx context.Context) error {
	return s.ServeIO(ctx, os.Stdin, os.Stdout)
}

// ServeIO serves one client that speaks newline-delimited JSON-RPC on r
// and w (as over stdio) until the client disconnects (r ends) or ctx
// ends. It closes w.
func (s *Server) ServeIO(ctx context.Context, r io.ReadCloser, w io.WriteCloser) error {
	err := s.sdk.Run(ctx, &sdk.IOTransport{Reader: r, Writer: w})
	if err != nil && (ctx.Err() != nil || errors.Is(err, io.EOF) || errors.Is(err, sdk.ErrConnectionClosed) || strings.Contains(err.Error(), "EOF")) {
		return nil
	}
	return err
}
