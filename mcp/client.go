package mcp

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/calf-go/calf/internal/httpheader"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/tool"
)

// Config describes an MCP server to use: a command that speaks MCP on its
// standard input and output, or the URL of a server reached over
// streamable HTTP.
type Config struct {
	// Name names the server. It is the name of the toolset (the channel
	// its calls travel on) and, unless Prefix says otherwise, the start of
	// its tools' names. Letters, digits, '_' and '-'.
	Name string

	// Command and Args start a server that speaks over standard input and
	// output. The process gets the environment variables HOME, LOGNAME,
	// PATH, SHELL, TERM, TMPDIR and USER of this process, then Env; Dir is
	// its working directory (default: this process's).
	Command string
	Args    []string
	Env     []string
	Dir     string

	// URL is the endpoint of a server reached over streamable HTTP
	// (http or https). Headers go with every request, such as an
	// Authorization header. HTTPClient, if set, makes the requests.
	URL        string
	Headers    http.Header
	HTTPClient *http.Client
	// OAuth, when set, authorizes the HTTP requests with OAuth 2.1 as MCP
	// specifies (the SDK's auth.AuthorizationCodeHandler, say).
	OAuth auth.OAuthHandler

	// Prefix starts the names the model sees for the server's tools, so
	// that two servers' tools do not clash. Default: Name + "__". Set
	// NoPrefix to use the server's names as they are.
	Prefix   string
	NoPrefix bool

	// Kinds sets the kind (see [tool.Kind]) of tools by their server
	// name, overriding what the server's annotations say.
	Kinds map[string]tool.Kind

	// MaxResultBytes bounds the content of one tool result; a larger one
	// is an error for the model. Default: DefaultMaxResultBytes.
	MaxResultBytes int

	// Logger receives the client's diagnostics, and the server's standard
	// error line by line at debug level. Default: none.
	Logger *slog.Logger

	// SDK are options of the underlying SDK client, for what a server may
	// ask of its client: elicitation, sampling, roots, logging. By default
	// the client offers none of them, as befits agents that run without a
	// person at hand. Its ToolListChangedHandler is called after the
	// client's own.
	SDK *sdk.ClientOptions
}

// DefaultMaxResultBytes is the default of [Config.MaxResultBytes].
const DefaultMaxResultBytes = 1 << 20

// Client is a connection to one MCP server, and the server's tools as a
// [tool.Toolset]: put it in [agent.Options.Toolsets]. It connects on first
// use (the first model call of an agent that has it), keeps the list of
// tools until the server says it changed, and reconnects when the server
// stops: a command is started again, after a pause that grows with each
// failure. A call while the server is down, or that the server's end
// interrupts, is an error the model gets as the tool's result; the run
// goes on. Each process that serves the agent has its own connection.
// Close stops the server; an agent's Serve arranges for that when its
// runtime's client shuts down.
type Client struct {
	cfg    Config
	prefix string
	log    *slog.Logger
	sdk    *sdk.Client

	mu         sync.Mutex
	sess       *sdk.ClientSession
	connecting chan struct{} // closed when the connection under way is done
	stderr     *tail
	failures   int
	retryAt    time.Time
	lastErr    error
	tools      []tool.Tool
	stale      bool
	closed     bool
}

var nameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// ErrClosed is returned by a [Client] that was closed.
var ErrClosed = errors.New("mcp: client closed")

// New returns a client for the server cfg describes. It checks the
// configuration but does not connect.
func New(cfg Config) (*Client, error) {
	if !nameRE.MatchString(cfg.Name) {
		return nil, fmt.Errorf("mcp: server name %q must match %s", cfg.Name, nameRE)
	}
	switch {
	case cfg.Command == "" && cfg.URL == "":
		return nil, fmt.Errorf("mcp: server %s: give a Command or a URL", cfg.Name)
	case cfg.Command != "" && cfg.URL != "":
		return nil, fmt.Errorf("mcp: server %s: give a Command or a URL, not both", cfg.Name)
	case cfg.URL != "":
		u, err := url.Parse(cfg.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("mcp: server %s: URL %q is not an http or https URL", cfg.Name, cfg.URL)
		}
	}
	for name, k := range cfg.Kinds {
		if !k.Valid() {
			return nil, fmt.Errorf("mcp: server %s: tool %s: unknown kind %q", cfg.Name, name, k)
		}
	}
	if cfg.MaxResultBytes <= 0 {
		cfg.MaxResultBytes = DefaultMaxResultBytes
	}
	c := &Client{cfg: cfg, prefix: cfg.Name + "__", log: cfg.Logger}
	if cfg.Prefix != "" {
		c.prefix = cfg.Prefix
	}
	if cfg.NoPrefix {
		c.prefix = ""
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	var co sdk.ClientOptions
	if cfg.SDK != nil {
		co = *cfg.SDK
	}
	if co.Logger == nil {
		co.Logger = c.log
	}
	userChanged := co.ToolListChangedHandler
	co.ToolListChangedHandler = func(ctx context.Context, req *sdk.ToolListChangedRequest) {
		c.mu.Lock()
		c.stale = true
		c.mu.Unlock()
		if userChanged != nil {
			userChanged(ctx, req)
		}
	}
	c.sdk = sdk.NewClient(&sdk.Implementation{Name: "calf", Version: version}, &co)
	return c, nil
}

// version is what the client says of itself to servers.
const version = "1"

// Name returns the server's name: the toolset's.
func (c *Client) Name() string { return c.cfg.Name }

// Close disconnects, stopping a command's process. The client cannot be
// used again.
func (c *Client) Close() error {
	c.mu.Lock()
	c.closed = true
	s := c.sess
	c.sess = nil
	c.mu.Unlock()
	if s != nil {
		return s.Close()
	}
	return nil
}

// restartDelay is the pause before the next connection after n failures
// in a row: none after the first, then 250 ms doubling up to 30 s.
func restartDelay(n int) time.Duration {
	if n <= 1 {
		return 0
	}
	d := 250 * time.Millisecond << min(n-2, 7)
	return min(d, 30*time.Second)
}

// session returns the live session, connecting if there is none.
func (c *Client) session(ctx context.Context) (*sdk.ClientSession, error) {
	for {
		c.mu.Lock()
		switch {
		case c.closed:
			c.mu.Unlock()
			return nil, ErrClosed
		case c.sess != nil:
			s := c.sess
			c.mu.Unlock()
			return s, nil
		case c.connecting != nil:
			wait := c.connecting
			c.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if now := time.Now(); now.Before(c.retryAt) {
			err := fmt.Errorf("server %s is down (trying again in %s): %w", c.cfg.Name, c.retryAt.Sub(now).Round(time.Millisecond), c.lastErr)
			c.mu.Unlock()
			return nil, err
		}
		done := make(chan struct{})
		c.connecting = done
		c.mu.Unlock()

		s, stderr, err := c.connect(ctx)

		c.mu.Lock()
		c.connecting = nil
		close(done)
		if err != nil {
			if ctx.Err() == nil {
				c.failed(err)
			}
			c.mu.Unlock()
			return nil, err
		}
		if c.closed {
			c.mu.Unlock()
			_ = s.Close()
			return nil, ErrClosed
		}
		c.sess, c.stderr, c.stale = s, stderr, true
		c.mu.Unlock()
		go c.watch(s, stderr)
		return s, nil
	}
}

// failed records a failure to connect, or a server that stopped, with
// c.mu held.
func (c *Client) failed(err error) {
	c.failures++
	c.lastErr = err
	c.retryAt = time.Now().Add(restartDelay(c.failures))
}

// watch waits for the session s to end, and forgets it: the next use
// connects again.
func (c *Client) watch(s *sdk.ClientSession, stderr *tail) {
	err := s.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sess != s {
		return // closed
	}
	c.sess = nil
	why := "the connection closed"
	if err != nil {
		why = err.Error()
	}
	if t := stderr.String(); t != "" {
		why += "; its last output on standard error: " + t
	}
	c.failed(fmt.Errorf("server %s stopped: %s", c.cfg.Name, why))
	c.log.Warn("mcp: server stopped", "server", c.cfg.Name, "err", c.lastErr)
}

// connect starts or reaches the server and initializes a session.
func (c *Client) connect(ctx context.Context) (*sdk.ClientSession, *tail, error) {
	var t sdk.Transport
	stderr := newTail(4096, c.cfg.Name, c.log)
	if c.cfg.Command != "" {
		// The process outlives the call that starts it: it is stopped by
		// Close, or by closing its standard input.
		cmd := exec.Command(c.cfg.Command, c.cfg.Args...)
		cmd.Env = append(baseEnv(), c.cfg.Env...)
		cmd.Dir = c.cfg.Dir
		cmd.Stderr = stderr
		t = &sdk.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}
	} else {
		hc := httpheader.Client(c.cfg.HTTPClient, c.cfg.Headers)
		t = &sdk.StreamableClientTransport{Endpoint: c.cfg.URL, HTTPClient: hc, MaxRetries: 2, OAuthHandler: c.cfg.OAuth}
	}
	s, err := c.sdk.Connect(ctx, t, nil)
	if err != nil {
		if out := stderr.String(); out != "" {
			err = fmt.Errorf("%w; its output on standard error: %s", err, out)
		}
		return nil, nil, fmt.Errorf("connect to server %s: %w", c.cfg.Name, err)
	}
	return s, stderr, nil
}

// baseEnv is the environment a server command inherits from this process,
// as MCP hosts commonly pass it.
func baseEnv() []string {
	var env []string
	for _, k := range []string{"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "TMPDIR", "USER"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// Tools returns the server's tools, connecting first if need be. The list
// is kept until the server says it changed (notifications/tools/list_changed)
// or the connection is made again. When the server cannot be reached, the
// tools last listed are returned with the error, so that the model still
// sees them and a call reports the server's state. A tool whose input
// schema is not a JSON object schema is left out, and named in the error.
func (c *Client) Tools(ctx context.Context) ([]tool.Tool, error) {
	c.mu.Lock()
	if c.tools != nil && !c.stale && c.sess != nil {
		tools := c.tools
		c.mu.Unlock()
		return tools, nil
	}
	c.mu.Unlock()
	s, err := c.session(ctx)
	if err != nil {
		c.mu.Lock()
		tools := c.tools
		c.mu.Unlock()
		return tools, fmt.Errorf("mcp: %w", err)
	}
	c.mu.Lock()
	c.stale = false // a change announced from now on lists again
	c.mu.Unlock()
	var listed []*sdk.Tool
	for t, err := range s.Tools(ctx, nil) {
		if err != nil {
			c.mu.Lock()
			c.stale = true
			tools := c.tools
			c.mu.Unlock()
			return tools, fmt.Errorf("mcp: server %s: list tools: %w", c.cfg.Name, err)
		}
		listed = append(listed, t)
	}
	tools, errs := make([]tool.Tool, 0, len(listed)), []error(nil)
	seen := map[string]string{}
	for _, t := range listed {
		ct, err := c.wrap(t)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		name := ct.Definition().Name
		if other, dup := seen[name]; dup {
			errs = append(errs, fmt.Errorf("mcp: server %s: tools %q and %q both become %q: %q left out", c.cfg.Name, other, t.Name, name, t.Name))
			continue
		}
		seen[name] = t.Name
		tools = append(tools, ct)
	}
	c.mu.Lock()
	c.tools = tools
	c.mu.Unlock()
	return tools, errors.Join(errs...)
}

// toolName returns the name the model sees for the server's tool name:
// the prefix, then the name with characters outside [a-zA-Z0-9_-]
// replaced by '_', cut to 64 characters with a digest when longer.
func (c *Client) toolName(name string) string {
	var b strings.Builder
	b.WriteString(c.prefix)
	for _, r := range name {
		if r < 128 && (r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	s := b.String()
	if len(s) > 64 {
		sum := sha256.Sum256([]byte(name))
		s = s[:55] + "_" + hex.EncodeToString(sum[:4])
	}
	return s
}

// wrap makes the server's tool t a Calf tool.
func (c *Client) wrap(t *sdk.Tool) (tool.Tool, error) {
	schema, err := json.Marshal(t.InputSchema)
	if err != nil {
		return nil, fmt.Errorf("mcp: server %s: tool %q: input schema: %v", c.cfg.Name, t.Name, err)
	}
	var head struct {
		Type any `json:"type"`
	}
	if err := json.Unmarshal(schema, &head); err != nil || head.Type != "object" {
		return nil, fmt.Errorf("mcp: server %s: tool %q left out: its input schema is not a JSON object schema (%.100s)", c.cfg.Name, t.Name, schema)
	}
	desc := t.Description
	if desc == "" && t.Annotations != nil {
		desc = t.Annotations.Title
	}
	def := model.ToolDefinition{Name: c.toolName(t.Name), Description: desc, Parameters: schema}
	name := t.Name
	ct := tool.NewRaw(def, func(ctx context.Context, args json.RawMessage) (*tool.Result, error) {
		return c.call(ctx, name, args)
	})
	return tool.Classify(ct, c.kind(t)), nil
}

// kind classifies the server's tool t: Config.Kinds, else its
// annotations (read-only: read; open world: network; not destructive:
// edit), else execute, the kind that asks the most.
func (c *Client) kind(t *sdk.Tool) tool.Kind {
	if k, ok := c.cfg.Kinds[t.Name]; ok {
		return k
	}
	a := t.Annotations
	switch {
	case a == nil:
		return tool.KindExecute
	case a.ReadOnlyHint && (a.OpenWorldHint == nil || !*a.OpenWorldHint):
		return tool.KindRead
	case a.OpenWorldHint != nil && *a.OpenWorldHint:
		return tool.KindNetwork
	case a.DestructiveHint != nil && !*a.DestructiveHint:
		return tool.KindEdit
	}
	return tool.KindExecute
}

// call calls the server's tool name.
func (c *Client) call(ctx context.Context, name string, args json.RawMessage) (*tool.Result, error) {
	s, err := c.session(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("mcp: %w", err)
	}
	res, err := s.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if errors.Is(err, sdk.ErrConnectionClosed) || errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("mcp: server %s stopped during the call, which may or may not have taken effect; it is being restarted: %w", c.cfg.Name, err)
		}
		return nil, fmt.Errorf("mcp: server %s: tool %s: %w", c.cfg.Name, name, err)
	}
	c.mu.Lock()
	c.failures = 0
	c.mu.Unlock()
	return c.result(name, res)
}

// result converts an MCP tool result: text and images as they are; audio,
// resource links and embedded resources described in text; structured
// content as the result's Structured (and as text when nothing else is).
func (c *Client) result(name string, res *sdk.CallToolResult) (*tool.Result, error) {
	r := &tool.Result{IsError: res.IsError}
	size := 0
	for _, content := range res.Content {
		var p model.Part
		switch v := content.(type) {
		case *sdk.TextContent:
			p = model.TextPart(v.Text)
			size += len(v.Text)
		case *sdk.ImageContent:
			p = model.ImagePart(v.MIMEType, v.Data)
			size += len(v.Data)
		case *sdk.AudioContent:
			p = model.TextPart(fmt.Sprintf("[audio of %d bytes, %s, not shown]", len(v.Data), v.MIMEType))
			size += len(v.Data)
		case *sdk.ResourceLink:
			p = model.TextPart(resourceText("Resource link", v.Name, v.URI, v.MIMEType, v.Description))
		case *sdk.EmbeddedResource:
			if v.Resource == nil {
				continue
			}
			rc := v.Resource
			switch {
			case rc.Text != "":
				p = model.TextPart(fmt.Sprintf("Resource %s:\n%s", rc.URI, rc.Text))
				size += len(rc.Text)
			case strings.HasPrefix(rc.MIMEType, "image/"):
				p = model.ImagePart(rc.MIMEType, rc.Blob)
				size += len(rc.Blob)
			default:
				p = model.TextPart(fmt.Sprintf("[resource %s: %d bytes of %s, not shown]", rc.URI, len(rc.Blob), cmp.Or(rc.MIMEType, "binary data")))
				size += len(rc.Blob)
			}
		default:
			p = model.TextPart(fmt.Sprintf("[content of type %T, not shown]", content))
		}
		r.Parts = append(r.Parts, p)
	}
	if res.StructuredContent != nil {
		raw, err := json.Marshal(res.StructuredContent)
		if err != nil {
			return nil, fmt.Errorf("mcp: server %s: tool %s: structured content: %v", c.cfg.Name, name, err)
		}
		r.Structured = raw
		size += len(raw)
		if len(r.Parts) == 0 {
			r.Parts = []model.Part{model.TextPart(string(raw))}
		}
	}
	if size > c.cfg.MaxResultBytes {
		return nil, fmt.Errorf("mcp: server %s: tool %s returned %d bytes, more than the limit of %d", c.cfg.Name, name, size, c.cfg.MaxResultBytes)
	}
	return r, nil
}

func resourceText(kind, name, uri, mime, desc string) string {
	s := fmt.Sprintf("%s: %s <%s>", kind, name, uri)
	if mime != "" {
		s += " (" + mime + ")"
	}
	if desc != "" {
		s += " " + desc
	}
	return s
}

// tail keeps the last bytes written to it, and logs each line at debug
// level.
type tail struct {
	mu     sync.Mutex
	buf    []byte
	max    int
	line   bytes.Buffer
	server string
	log    *slog.Logger
}

func newTail(max int, server string, log *slog.Logger) *tail {
	return &tail{max: max, server: server, log: log}
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = t.buf[len(t.buf)-t.max:]
	}
	t.line.Write(p)
	for {
		i := bytes.IndexByte(t.line.Bytes(), '\n')
		if i < 0 {
			break
		}
		t.log.Debug("mcp: server stderr", "server", t.server, "line", string(t.line.Next(i + 1)[:i]))
	}
	if t.line.Len() > t.max {
		t.line.Reset()
	}
	return len(p), nil
}

// String returns the last output, trimmed.
func (t *tail) String() string {
	if t == nil {
		return ""
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.buf))
}
