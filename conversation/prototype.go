package conversation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/calf-go/calf/internal/convid"
	"github.com/calf-go/calf/internal/modelspec"
	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/tool/builtin"
)

// kindPrototype is the record kind of prototypes: one record per prototype,
// its id the prototype's name, its data the [Prototype] as JSON.
const kindPrototype = "conversation_prototype"

// Kind says what serves a prototype's instances.
type Kind string

// The kinds of prototype.
const (
	// KindLLM: an agent on a model, with a system prompt and tools.
	KindLLM Kind = "llm"
	// KindCode: Go code registered under the prototype's name, no model
	// (the docmem agent).
	KindCode Kind = "code"
	// KindExternal: an agent served by another process, in any language,
	// that speaks the conversation wire format of docs/channels.md.
	KindExternal Kind = "external"
)

// Bounds of a prototype's text fields.
const (
	maxRoleLen         = 256
	maxDescriptionLen  = 4 << 10
	maxSystemPromptLen = 64 << 10
)

// Prototype is a named template of agents: each conversation that needs
// one has its own instance of it. Prototypes are data: stored as records
// of kind [kindPrototype], registered from Go or loaded from a YAML file
// ([LoadFile]).
type Prototype struct {
	// Name names the prototype: 1 to 48 bytes, a lowercase letter
	// first, then lowercase letters, digits, '-' and '_', not "user" (it
	// is a channel token on every broker). Required.
	Name string `json:"name"`
	// Role says in a line what its instances do.
	Role string `json:"role,omitempty"`
	// Description says more, for people and for the models that choose
	// subagents.
	Description string `json:"description,omitempty"`
	// Kind says what serves the instances. Default [KindLLM].
	Kind Kind `json:"kind,omitempty"`
	// SystemPrompt is the system prompt of an LLM prototype.
	SystemPrompt string `json:"system_prompt,omitempty"`
	// Model names the model of an LLM prototype as model/models does
	// ("anthropic:claude-sonnet-4-5", "openai:gpt-4.1-mini", a URL).
	// Default: the serving process's model.
	Model string `json:"model,omitempty"`
	// Tools are built-in tools by name ([builtin.Names]).
	Tools []string `json:"tools,omitempty"`
	// MCPServers are the MCP servers whose tools the instances use.
	MCPServers []MCPServer `json:"mcp_servers,omitempty"`
	// Subagents name the prototypes whose instances this prototype's
	// instances may start in their conversation.
	Subagents []string `json:"subagents,omitempty"`
	// Permissions say which tool calls run without a person's approval.
	Permissions *Permissions `json:"permissions,omitempty"`
	// Schedule, on an LLM prototype, starts runs of its agent on a clock
	// where it is served as an agent (calf worker --agents registers it
	// as a schedule named after the prototype; see package schedule).
	Schedule *PrototypeSchedule `json:"schedule,omitempty"`
	// Flow, on an LLM prototype, holds its agent's runs to limits per
	// key where it is served as an agent (agent.FlowControl).
	Flow *PrototypeFlow `json:"flow,omitempty"`
}

// PrototypeFlow is the data form of an agent's flow control: the runs'
// key ("session": the run's session; "first_word": the prompt's text
// before its first space or colon; empty: one key for all), at most
// Concurrency in progress per key, Rate ("N/DURATION", such as "10/1m")
// with Burst more after a quiet spell, Debounce (a Go duration) for
// bursts of one key, and at most MaxRunning in progress across keys.
type PrototypeFlow struct {
	Key         string `json:"key,omitempty" yaml:"key"`
	Concurrency int    `json:"concurrency,omitempty" yaml:"concurrency"`
	MaxRunning  int    `json:"max_running,omitempty" yaml:"max_running"`
	Rate        string `json:"rate,omitempty" yaml:"rate"`
	Burst       int    `json:"burst,omitempty" yaml:"burst"`
	Debounce    string `json:"debounce,omitempty" yaml:"debounce"`
}

// FlowKeys are the keys a [PrototypeFlow] may name.
var FlowKeys = []string{"", "session", "first_word"}

// ParseRate parses a rate of a [PrototypeFlow]: "N/DURATION", such as
// "10/1m" or "1000/24h".
func ParseRate(s string) (n int, per time.Duration, err error) {
	ns, ds, ok := strings.Cut(s, "/")
	if !ok {
		return 0, 0, fmt.Errorf("rate %q: want N/DURATION, such as 10/1m", s)
	}
	if n, err = strconv.Atoi(strings.TrimSpace(ns)); err != nil || n <= 0 {
		return 0, 0, fmt.Errorf("rate %q: the count is not a positive whole number", s)
	}
	if per, err = time.ParseDuration(strings.TrimSpace(ds)); err != nil || per <= 0 {
		return 0, 0, fmt.Errorf("rate %q: the period is not a positive duration, such as 1m or 24h", s)
	}
	if per/time.Duration(n) <= 0 {
		return 0, 0, fmt.Errorf("rate %q: too many for its period", s)
	}
	return n, per, nil
}

// PrototypeSchedule is the data form of a schedule of a prototype's
// agent: its runs' prompt, at the times of Cron (in TimeZone) or every
// Every (a Go duration, such as "6h"), with package schedule's overlap
// and catch-up policies by name.
type PrototypeSchedule struct {
	Cron     string `json:"cron,omitempty" yaml:"cron"`
	TimeZone string `json:"time_zone,omitempty" yaml:"time_zone"`
	Every    string `json:"every,omitempty" yaml:"every"`
	Prompt   string `json:"prompt" yaml:"prompt"`
	Overlap  string `json:"overlap,omitempty" yaml:"overlap"`
	CatchUp  string `json:"catch_up,omitempty" yaml:"catch_up"`
}

// MCPServer is an MCP server: a command to start (stdio) or a URL
// (streamable HTTP), one of the two.
type MCPServer struct {
	// Name names the server among the prototype's. Required.
	Name string `json:"name" yaml:"name"`
	// Command is the program and its arguments.
	Command []string `json:"command,omitempty" yaml:"command"`
	// URL is the server's streamable HTTP endpoint.
	URL string `json:"url,omitempty" yaml:"url"`
}

// Permissions are the data form of an agent's tool permissions, with the
// agent package's vocabulary.
type Permissions struct {
	// Mode is "ask" (the default), "accept_reads", "accept_edits" or
	// "bypass".
	Mode string `json:"mode,omitempty" yaml:"mode"`
	// Allowed tools run without asking: names or path.Match patterns.
	Allowed []string `json:"allowed,omitempty" yaml:"allowed"`
	// Disallowed tools never run. They win over Allowed.
	Disallowed []string `json:"disallowed,omitempty" yaml:"disallowed"`
}

var permissionModes = []string{"ask", "accept_reads", "accept_edits", "bypass"}

// Problem is one thing wrong with a prototype.
type Problem struct {
	// Line is the line of a file where the problem is, 0 when unknown.
	Line int
	// Prototype names the prototype, when known.
	Prototype string
	// Field is the field at fault ("model", "subagents"), if one.
	Field string
	// Message says what is wrong.
	Message string
}

// String returns the problem as "line N: prototype P: field: message",
// leaving out what is unknown.
func (p Problem) String() string {
	var b strings.Builder
	if p.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", p.Line)
	}
	if p.Prototype != "" {
		fmt.Fprintf(&b, "prototype %s: ", p.Prototype)
	}
	if p.Field != "" {
		fmt.Fprintf(&b, "%s: ", p.Field)
	}
	b.WriteString(p.Message)
	return b.String()
}

// ValidationError lists every problem found in a set of prototypes. It
// matches [ErrInvalid].
type ValidationError struct {
	// File is the file the prototypes came from, if any.
	File     string
	Problems []Problem
}

// Error lists the problems, one a line, each as FILE:LINE when the file
// is known.
func (e *ValidationError) Error() string {
	var b strings.Builder
	b.WriteString("conversation: ")
	if e.File != "" {
		b.WriteString(e.File + ": ")
	}
	fmt.Fprintf(&b, "%d problem(s)", len(e.Problems))
	for _, p := range e.Problems {
		b.WriteString("\n\t")
		if e.File != "" && p.Line > 0 {
			fmt.Fprintf(&b, "%s:%d: ", e.File, p.Line)
			p.Line = 0
		}
		b.WriteString(p.String())
	}
	return b.String()
}

// Is reports whether target is [ErrInvalid].
func (e *ValidationError) Is(target error) bool { return target == ErrInvalid }

// lines gives the line of a prototype and of its fields, when it came from
// a file.
type lines struct {
	proto  int
	fields map[string]int
}

func (l *lines) of(field string) int {
	if l == nil {
		return 0
	}
	if n, ok := l.fields[field]; ok {
		return n
	}
	return l.proto
}

// Validate lists the problems of p alone: its name, kind, fields, model
// name, tools, MCP servers and permissions. Whether its subagents exist is
// a question about a set: see [ValidateSet].
func (p *Prototype) Validate() error {
	if probs := p.problems(nil); len(probs) > 0 {
		return &ValidationError{Problems: probs}
	}
	return nil
}

func (p *Prototype) problems(l *lines) []Problem {
	var out []Problem
	add := func(field, format string, args ...any) {
		out = append(out, Problem{Line: l.of(field), Prototype: p.Name, Field: field, Message: fmt.Sprintf(format, args...)})
	}
	if p.Name == "" {
		add("name", "missing name")
	} else if err := convid.CheckName(p.Name); err != nil {
		add("name", "%s", strings.TrimPrefix(err.Error(), "conversation: "))
	}
	kind := p.Kind
	if kind == "" {
		kind = KindLLM
	}
	switch kind {
	case KindLLM, KindCode, KindExternal:
	default:
		add("kind", "unknown kind %q (want llm, code or external)", p.Kind)
	}
	if len(p.Role) > maxRoleLen {
		add("role", "longer than %d bytes", maxRoleLen)
	}
	if len(p.Description) > maxDescriptionLen {
		add("description", "longer than %d bytes", maxDescriptionLen)
	}
	if len(p.SystemPrompt) > maxSystemPromptLen {
		add("system_prompt", "longer than %d bytes", maxSystemPromptLen)
	}
	if kind == KindCode || kind == KindExternal {
		for _, f := range []struct {
			name string
			set  bool
		}{{"system_prompt", p.SystemPrompt != ""}, {"model", p.Model != ""}, {"tools", len(p.Tools) > 0}, {"mcp_servers", len(p.MCPServers) > 0}, {"permissions", p.Permissions != nil}} {
			if f.set {
				add(f.name, "only an llm prototype has one (this one is %s)", kind)
			}
		}
	}
	if sc := p.Schedule; sc != nil {
		switch {
		case kind != KindLLM:
			add("schedule", "only an llm prototype has one (this one is %s)", kind)
		case sc.Prompt == "":
			add("schedule", "no prompt: what each scheduled run is asked")
		case (sc.Cron == "") == (sc.Every == ""):
			add("schedule", "give cron or every, one of the two")
		case sc.Every != "":
			if d, err := time.ParseDuration(sc.Every); err != nil || d < time.Second {
				add("schedule", "every %q: a duration of a second or more, such as 15m or 6h", sc.Every)
			}
		}
	}
	if fl := p.Flow; fl != nil {
		switch {
		case kind != KindLLM:
			add("flow", "only an llm prototype has one (this one is %s)", kind)
		case !slices.Contains(FlowKeys, fl.Key):
			add("flow", "key %q: session, first_word, or none", fl.Key)
		case fl.Concurrency < 0 || fl.Burst < 0 || fl.MaxRunning < 0:
			add("flow", "concurrency, max_running and burst are counts, 0 or more")
		}
		if fl.Rate != "" {
			if _, _, err := ParseRate(fl.Rate); err != nil {
				add("flow", "%v", err)
			}
		}
		if fl.Debounce != "" {
			if d, err := time.ParseDuration(fl.Debounce); err != nil || d <= 0 {
				add("flow", "debounce %q: a positive duration, such as 2s", fl.Debounce)
			}
		}
	}
	if p.Model != "" {
		if _, err := modelspec.Parse(p.Model); err != nil {
			add("model", "%v", err)
		} else if strings.ContainsAny(p.Model, " \t\r\n") {
			add("model", "%q holds white space", p.Model)
		}
	}
	known := builtin.Names()
	seen := map[string]bool{}
	for _, t := range p.Tools {
		switch {
		case !slices.Contains(known, t):
			add("tools", "unknown built-in tool %q (known: %s)", t, strings.Join(known, ", "))
		case seen[t]:
			add("tools", "%q listed twice", t)
		}
		seen[t] = true
	}
	servers := map[string]bool{}
	for i, s := range p.MCPServers {
		switch {
		case s.Name == "":
			add("mcp_servers", "server %d has no name", i+1)
		case servers[s.Name]:
			add("mcp_servers", "two servers named %q", s.Name)
		}
		servers[s.Name] = true
		if (len(s.Command) > 0) == (s.URL != "") {
			add("mcp_servers", "server %q needs a command or a url, one of the two", s.Name)
		}
		if s.URL != "" && !strings.HasPrefix(s.URL, "http://") && !strings.HasPrefix(s.URL, "https://") {
			add("mcp_servers", "server %q: url %q is not http(s)", s.Name, s.URL)
		}
	}
	subs := map[string]bool{}
	for _, s := range p.Subagents {
		switch {
		case convid.CheckName(s) != nil:
			add("subagents", "%q is not a prototype name", s)
		case s == p.Name:
			add("subagents", "%q names the prototype itself", s)
		case subs[s]:
			add("subagents", "%q listed twice", s)
		}
		subs[s] = true
	}
	if perm := p.Permissions; perm != nil {
		if perm.Mode != "" && !slices.Contains(permissionModes, perm.Mode) {
			add("permissions", "unknown mode %q (want %s)", perm.Mode, strings.Join(permissionModes, ", "))
		}
		for _, pat := range append(slices.Clone(perm.Allowed), perm.Disallowed...) {
			for alt := range strings.SplitSeq(pat, "|") {
				if _, err := path.Match(alt, ""); err != nil || alt == "" {
					add("permissions", "bad tool pattern %q", pat)
					break
				}
			}
		}
	}
	return out
}

// ValidateSet lists every problem of a set of prototypes at once: each
// prototype's own ([Prototype.Validate]), duplicate names, subagents that
// name no prototype of the set, and cycles of subagents.
func ValidateSet(ps []Prototype) error {
	if probs := validateSet(ps, nil); len(probs) > 0 {
		return &ValidationError{Problems: probs}
	}
	return nil
}

func validateSet(ps []Prototype, ls []*lines) []Problem {
	lineOf := func(i int, field string) *lines {
		if ls == nil {
			return nil
		}
		return ls[i]
	}
	var out []Problem
	index := map[string]int{}
	for i := range ps {
		out = append(out, ps[i].problems(lineOf(i, ""))...)
		if ps[i].Name == "" {
			continue
		}
		if j, dup := index[ps[i].Name]; dup {
			msg := "defined twice"
			if l := lineOf(j, ""); l != nil {
				msg = fmt.Sprintf("defined twice (first at line %d)", l.proto)
			}
			out = append(out, Problem{Line: lineOf(i, "").of("name"), Prototype: ps[i].Name, Field: "name", Message: msg})
			continue
		}
		index[ps[i].Name] = i
	}
	for i, p := range ps {
		for _, s := range p.Subagents {
			if _, ok := index[s]; !ok && convid.CheckName(s) == nil && s != p.Name {
				out = append(out, Problem{Line: lineOf(i, "").of("subagents"), Prototype: p.Name, Field: "subagents", Message: fmt.Sprintf("%q names no prototype", s)})
			}
		}
	}
	// Cycles: a depth-first walk; a prototype met again on the current
	// path closes a cycle, reported once, at its first prototype in the
	// order of the set.
	const (
		unseen = iota
		onPath
		done
	)
	state := make([]int, len(ps))
	var stack []int
	var walk func(i int)
	walk = func(i int) {
		state[i] = onPath
		stack = append(stack, i)
		for _, s := range ps[i].Subagents {
			j, ok := index[s]
			if !ok || j == i {
				continue
			}
			switch state[j] {
			case unseen:
				walk(j)
			case onPath:
				k := slices.Index(stack, j)
				var names []string
				first := j
				for _, n := range stack[k:] {
					names = append(names, ps[n].Name)
					first = min(first, n)
				}
				names = append(names, ps[j].Name)
				out = append(out, Problem{Line: lineOf(first, "").of("subagents"), Prototype: ps[first].Name, Field: "subagents", Message: "a cycle of subagents: " + strings.Join(names, " -> ")})
			}
		}
		stack = stack[:len(stack)-1]
		state[i] = done
	}
	for i := range ps {
		if state[i] == unseen && index[ps[i].Name] == i {
			walk(i)
		}
	}
	return out
}

// Prototypes keeps prototypes in a store, as records of kind
// [kindPrototype].
type Prototypes struct {
	s store.Store
}

// NewPrototypes returns the prototypes kept in s.
func NewPrototypes(s store.Store) *Prototypes { return &Prototypes{s: s} }

// Register validates p and stores it. A prototype of that name registered
// already is an error matching [ErrExists] unless replace is set, when p
// replaces it (compare-and-swap: a concurrent change is retried on).
// Register does not check that p's subagents are registered: prototypes
// may come in any order; an instance of a missing one cannot be started.
func (r *Prototypes) Register(ctx context.Context, p Prototype, replace bool) error {
	if err := p.Validate(); err != nil {
		return err
	}
	if p.Kind == "" {
		p.Kind = KindLLM
	}
	data, err := json.Marshal(p)
	if err != nil {
		return err
	}
	if !replace {
		_, err := r.s.Put(ctx, kindPrototype, p.Name, data, 0)
		if errors.Is(err, store.ErrConflict) {
			return fmt.Errorf("%w: prototype %s", ErrExists, p.Name)
		}
		return err
	}
	_, err = store.Update(ctx, r.s, kindPrototype, p.Name, func([]byte, bool) ([]byte, error) { return data, nil })
	return err
}

// RegisterAll validates ps as a set ([ValidateSet]) and registers each.
// Nothing is registered when the set has a problem.
func (r *Prototypes) RegisterAll(ctx context.Context, ps []Prototype, replace bool) error {
	if err := ValidateSet(ps); err != nil {
		return err
	}
	for _, p := range ps {
		if err := r.Register(ctx, p, replace); err != nil {
			return err
		}
	}
	return nil
}

// Get returns the prototype named name, or an error matching [ErrNotFound].
func (r *Prototypes) Get(ctx context.Context, name string) (Prototype, error) {
	rec, err := r.s.Get(ctx, kindPrototype, name)
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrInvalidKey) {
		return Prototype{}, fmt.Errorf("%w: prototype %q", ErrNotFound, convid.Truncate(name))
	}
	if err != nil {
		return Prototype{}, err
	}
	var p Prototype
	if err := json.Unmarshal(rec.Data, &p); err != nil {
		return Prototype{}, fmt.Errorf("conversation: prototype %s: %w", name, err)
	}
	return p, nil
}

// List returns every registered prototype, by name.
func (r *Prototypes) List(ctx context.Context) ([]Prototype, error) {
	var out []Prototype
	for after := ""; ; {
		recs, err := r.s.List(ctx, kindPrototype, "", after, 100)
		if err != nil {
			return nil, err
		}
		for _, rec := range recs {
			var p Prototype
			if err := json.Unmarshal(rec.Data, &p); err != nil {
				return nil, fmt.Errorf("conversation: prototype %s: %w", rec.ID, err)
			}
			out = append(out, p)
		}
		if len(recs) < 100 {
			return out, nil
		}
		after = recs[len(recs)-1].ID
	}
}

// Remove removes the prototype named name, or returns an error matching
// [ErrNotFound]. Its instances already started keep their records.
func (r *Prototypes) Remove(ctx context.Context, name string) error {
	rec, err := r.s.Get(ctx, kindPrototype, name)
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrInvalidKey) {
		return fmt.Errorf("%w: prototype %q", ErrNotFound, convid.Truncate(name))
	}
	if err != nil {
		return err
	}
	return r.s.Delete(ctx, kindPrototype, name, rec.Version)
}
