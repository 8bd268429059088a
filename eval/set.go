package eval

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/calf-go/calf/tool"
)

// MaxRepeats bounds [Case.Repeats].
const MaxRepeats = 100

// Set is an eval set: named cases.
type Set struct {
	// Name names the set in reports.
	Name  string `json:"name,omitempty" yaml:"name,omitempty"`
	Cases []Case `json:"cases" yaml:"cases"`
}

// Case is one input and what a good run of it looks like. Every
// expectation given is checked; one left out is not.
type Case struct {
	// ID names the case, unique within its set.
	ID string `json:"id" yaml:"id"`
	// Input is the user's message.
	Input string `json:"input" yaml:"input"`
	// History is the conversation before the input, if any.
	History []Message `json:"history,omitempty" yaml:"history,omitempty"`
	// Expect checks the final answer.
	Expect *Expect `json:"expect,omitempty" yaml:"expect,omitempty"`
	// Trajectory checks the tool calls made.
	Trajectory *Trajectory `json:"trajectory,omitempty" yaml:"trajectory,omitempty"`
	// Rubrics are what a judge model is asked to check, one statement
	// each, about the answer.
	Rubrics []string `json:"rubrics,omitempty" yaml:"rubrics,omitempty"`
	// Budget bounds what a run of the case spends.
	Budget *Budget `json:"budget,omitempty" yaml:"budget,omitempty"`
	// Tags select cases.
	Tags []string `json:"tags,omitempty" yaml:"tags,omitempty"`
	// Repeats is how many times the case runs (default 1, at most
	// [MaxRepeats]): see [PassAtK] and [PassHatK].
	Repeats int `json:"repeats,omitempty" yaml:"repeats,omitempty"`
}

// Message is a message of a case's history.
type Message struct {
	// Role is "user" or "assistant".
	Role    string `json:"role" yaml:"role"`
	Content string `json:"content" yaml:"content"`
}

// Expect checks a run's final answer: its text, or for a structured
// answer its JSON.
type Expect struct {
	// Equals, when set, is the whole answer, compared after trimming
	// white space (for JSON answers: the same JSON value).
	Equals *string `json:"equals,omitempty" yaml:"equals,omitempty"`
	// Contains are substrings the answer must hold; NotContains, ones it
	// must not. IgnoreCase compares both without regard to case.
	Contains    []string `json:"contains,omitempty" yaml:"contains,omitempty"`
	NotContains []string `json:"not_contains,omitempty" yaml:"not_contains,omitempty"`
	IgnoreCase  bool     `json:"ignore_case,omitempty" yaml:"ignore_case,omitempty"`
	// Regex is a regular expression (Go's syntax) the answer must match.
	Regex string `json:"regex,omitempty" yaml:"regex,omitempty"`
	// Schema is a JSON Schema the answer, as JSON, must satisfy.
	Schema JSON `json:"schema,omitempty" yaml:"schema,omitempty"`
	// Fields are values that fields of the answer, as a JSON object, must
	// have, by path: "total", "items.0.name" (a number indexes an array).
	Fields map[string]any `json:"fields,omitempty" yaml:"fields,omitempty"`

	regex  *regexp.Regexp
	schema *tool.Schema
}

// The modes of a [Trajectory].
const (
	// TrajectoryExact: the calls made are the expected ones, in order,
	// no more.
	TrajectoryExact = "exact"
	// TrajectoryInOrder: the expected calls were made in their order,
	// with others between them allowed.
	TrajectoryInOrder = "in_order"
	// TrajectoryAnyOrder: the calls made are the expected ones, in any
	// order, no more.
	TrajectoryAnyOrder = "any_order"
	// TrajectorySubset: every call made is among the expected ones (the
	// run may make fewer).
	TrajectorySubset = "subset"
	// TrajectorySuperset: every expected call was made, in any order,
	// with others allowed.
	TrajectorySuperset = "superset"
)

// Trajectory is the tool calls a run is expected to make.
type Trajectory struct {
	// Mode is how the calls made are compared with Calls: one of the
	// Trajectory* constants; default [TrajectoryExact].
	Mode  string         `json:"mode,omitempty" yaml:"mode,omitempty"`
	Calls []ExpectedCall `json:"calls" yaml:"calls"`
}

// ExpectedCall is a tool call a run is expected to make.
type ExpectedCall struct {
	Tool string `json:"tool" yaml:"tool"`
	// Args, when set, are the call's arguments: with ArgsMatch "exact"
	// (the default) the same JSON value; with "subset", every field given
	// has that value (recursively), others are free.
	Args      JSON   `json:"args,omitempty" yaml:"args,omitempty"`
	ArgsMatch string `json:"args_match,omitempty" yaml:"args_match,omitempty"`
}

// Budget bounds what one run of a case spends; a zero field is no bound.
type Budget struct {
	MaxCostUSD    float64  `json:"max_cost_usd,omitempty" yaml:"max_cost_usd,omitempty"`
	MaxTokens     int64    `json:"max_tokens,omitempty" yaml:"max_tokens,omitempty"`
	MaxModelCalls int64    `json:"max_model_calls,omitempty" yaml:"max_model_calls,omitempty"`
	MaxLatency    Duration `json:"max_latency,omitempty" yaml:"max_latency,omitempty"`
}

// Duration is a time.Duration written as Go writes one ("1.5s", "2m").
type Duration time.Duration

// MarshalJSON writes d as "1.5s".
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads "1.5s".
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration is a string such as \"1.5s\": %w", err)
	}
	return d.parse(s)
}

// UnmarshalYAML reads "1.5s".
func (d *Duration) UnmarshalYAML(n *yaml.Node) error { return d.parse(n.Value) }

func (d *Duration) parse(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil || v < 0 {
		return fmt.Errorf("%q is not a duration such as \"1.5s\"", s)
	}
	*d = Duration(v)
	return nil
}

// Load reads the eval set in the file name: YAML (.yaml, .yml) or JSON
// Lines (.jsonl, one case per line), and checks it ([Set.Check]).
func Load(name string) (*Set, error) {
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	var s *Set
	switch ext := strings.ToLower(filepath.Ext(name)); ext {
	case ".yaml", ".yml":
		s, err = ParseYAML(data)
	case ".jsonl":
		s, err = ParseJSONL(data)
	default:
		return nil, fmt.Errorf("eval: %s: an eval set is a .yaml, .yml or .jsonl file, not %q", name, ext)
	}
	if err != nil {
		return nil, fmt.Errorf("eval: %s: %w", name, err)
	}
	if s.Name == "" {
		s.Name = strings.TrimSuffix(filepath.Base(name), filepath.Ext(name))
	}
	return s, nil
}

// ParseYAML reads an eval set from YAML, and checks it. A field it does
// not know is an error.
func ParseYAML(data []byte) (*Set, error) {
	var s Set
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&s); err != nil {
		return nil, err
	}
	return &s, s.Check()
}

// JSON is a JSON value (a schema, a call's arguments), written in a YAML
// set as YAML.
type JSON []byte

// MarshalJSON returns j, or null when it is empty.
func (j JSON) MarshalJSON() ([]byte, error) {
	if len(j) == 0 {
		return []byte("null"), nil
	}
	return j, nil
}

// UnmarshalJSON keeps a copy of b.
func (j *JSON) UnmarshalJSON(b []byte) error {
	*j = append((*j)[:0], b...)
	return nil
}

// UnmarshalYAML keeps the JSON of the YAML value n.
func (j *JSON) UnmarshalYAML(n *yaml.Node) error {
	var v any
	if err := n.Decode(&v); err != nil {
		return err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*j = b
	return nil
}

// ParseJSONL reads an eval set of one case per line (blank lines
// skipped), and checks it.
func ParseJSONL(data []byte) (*Set, error) {
	s := &Set{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for line := 1; sc.Scan(); line++ {
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var c Case
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&c); err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		s.Cases = append(s.Cases, c)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return s, s.Check()
}

// Check reports every problem of the set at once: cases without an id
// or an input, ids used twice, unknown modes, regular expressions and
// schemas that do not compile, repeats out of bounds. It compiles what
// [Score] uses.
func (s *Set) Check() error {
	var errs []error
	seen := map[string]bool{}
	for i := range s.Cases {
		c := &s.Cases[i]
		bad := func(format string, a ...any) {
			errs = append(errs, fmt.Errorf("case %d (%s): %s", i+1, cmp.Or(c.ID, "no id"), fmt.Sprintf(format, a...)))
		}
		switch {
		case c.ID == "":
			bad("no id")
		case seen[c.ID]:
			bad("the id is used by an earlier case")
		}
		seen[c.ID] = true
		if strings.TrimSpace(c.Input) == "" {
			bad("no input")
		}
		for _, m := range c.History {
			if m.Role != "user" && m.Role != "assistant" {
				bad("a history message's role is user or assistant, not %q", m.Role)
			}
		}
		if c.Repeats < 0 || c.Repeats > MaxRepeats {
			bad("repeats is 1 to %d, not %d", MaxRepeats, c.Repeats)
		}
		if err := c.compile(); err != nil {
			bad("%v", err)
		}
	}
	return errors.Join(errs...)
}

// compile checks and compiles the case's expectations.
func (c *Case) compile() error {
	var errs []error
	if e := c.Expect; e != nil {
		if e.Regex != "" {
			re, err := regexp.Compile(e.Regex)
			if err != nil {
				errs = append(errs, fmt.Errorf("expect.regex: %w", err))
			}
			e.regex = re
		}
		if len(e.Schema) > 0 {
			sch, err := tool.ParseSchema(json.RawMessage(e.Schema))
			if err != nil {
				errs = append(errs, fmt.Errorf("expect.schema: %w", err))
			}
			e.schema = sch
		}
		for path := range e.Fields {
			if path == "" || strings.HasPrefix(path, ".") || strings.HasSuffix(path, ".") || strings.Contains(path, "..") {
				errs = append(errs, fmt.Errorf("expect.fields: %q is not a path such as items.0.name", path))
			}
		}
	}
	if t := c.Trajectory; t != nil {
		switch t.Mode {
		case "", TrajectoryExact, TrajectoryInOrder, TrajectoryAnyOrder, TrajectorySubset, TrajectorySuperset:
		default:
			errs = append(errs, fmt.Errorf("trajectory.mode is exact, in_order, any_order, subset or superset, not %q", t.Mode))
		}
		for i, call := range t.Calls {
			if call.Tool == "" {
				errs = append(errs, fmt.Errorf("trajectory.calls[%d]: no tool", i))
			}
			switch call.ArgsMatch {
			case "", "exact", "subset":
			default:
				errs = append(errs, fmt.Errorf("trajectory.calls[%d].args_match is exact or subset, not %q", i, call.ArgsMatch))
			}
			if len(call.Args) > 0 && !json.Valid(call.Args) {
				errs = append(errs, fmt.Errorf("trajectory.calls[%d].args is not JSON", i))
			}
		}
	}
	return errors.Join(errs...)
}
