package conversation

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	yaml "go.yaml.in/yaml/v3"
)

// maxFileSize bounds a prototypes file.
const maxFileSize = 4 << 20

// LoadFile reads the prototypes of a YAML file (see [Parse]).
func LoadFile(name string) ([]Prototype, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("conversation: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("conversation: %s: %w", name, err)
	}
	ps, err := Parse(data)
	var ve *ValidationError
	if errors.As(err, &ve) {
		ve.File = name
	}
	return ps, err
}

// Parse reads prototypes from YAML of this shape:
//
//	prototypes:
//	  - name: conversational-agent
//	    role: Orchestrator and user-facing AI
//	    kind: llm
//	    model: anthropic:claude-sonnet-4-5
//	    system_prompt: |
//	      You talk with the user...
//	    tools: [web_fetch]
//	    mcp_servers:
//	      - name: files
//	        command: [mcp-server-filesystem, /srv/data]
//	    subagents: [docmem-agent]
//	    permissions: {mode: accept_reads, disallowed: [bash]}
//	  - name: docmem-agent
//	    kind: code
//
// The fields are those of [Prototype], with the names of its JSON tags.
// Parse checks the whole file as [ValidateSet] does, and reports unknown
// fields and values of the wrong type too: the error, a
// [*ValidationError], lists every problem at once, each with its line.
func Parse(data []byte) ([]Prototype, error) {
	if len(data) > maxFileSize {
		return nil, &ValidationError{Problems: []Problem{{Message: fmt.Sprintf("larger than %d bytes", maxFileSize)}}}
	}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &ValidationError{Problems: []Problem{{Message: "empty file: want a prototypes: list"}}}
		}
		return nil, &ValidationError{Problems: []Problem{syntaxProblem(data, err)}}
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, &ValidationError{Problems: []Problem{{Line: extra.Line, Message: "more than one YAML document"}}}
	}
	var probs []Problem
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if root.Kind != yaml.MappingNode {
		return nil, &ValidationError{Problems: []Problem{{Line: root.Line, Message: "want a mapping with a prototypes: list"}}}
	}
	var list *yaml.Node
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if k.Value == "prototypes" {
			list = v
			continue
		}
		probs = append(probs, Problem{Line: k.Line, Message: fmt.Sprintf("unknown field %q (want prototypes)", k.Value)})
	}
	if list == nil {
		probs = append(probs, Problem{Line: root.Line, Message: "no prototypes: list"})
		return nil, &ValidationError{Problems: probs}
	}
	if list.Kind != yaml.SequenceNode {
		probs = append(probs, Problem{Line: list.Line, Field: "prototypes", Message: "want a list"})
		return nil, &ValidationError{Problems: probs}
	}
	var ps []Prototype
	var ls []*lines
	for _, item := range list.Content {
		p, l, itemProbs := decodePrototype(item)
		probs = append(probs, itemProbs...)
		ps = append(ps, p)
		ls = append(ls, l)
	}
	probs = append(probs, validateSet(ps, ls)...)
	if len(probs) > 0 {
		slices.SortStableFunc(probs, func(a, b Problem) int { return cmp.Compare(a.Line, b.Line) })
		return nil, &ValidationError{Problems: probs}
	}
	for i := range ps {
		if ps[i].Kind == "" {
			ps[i].Kind = KindLLM
		}
	}
	return ps, nil
}

// decodePrototype decodes one item of the list field by field, so that
// each problem has its own line and one bad field hides no other.
func decodePrototype(n *yaml.Node) (Prototype, *lines, []Problem) {
	l := &lines{proto: n.Line, fields: map[string]int{}}
	var p Prototype
	if n.Kind != yaml.MappingNode {
		return p, l, []Problem{{Line: n.Line, Message: "want a mapping (name:, kind:, ...)"}}
	}
	// The name first, so that problems of other fields can name it.
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == "name" && n.Content[i+1].Kind == yaml.ScalarNode {
			p.Name = n.Content[i+1].Value
		}
	}
	var probs []Problem
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		l.fields[k.Value] = k.Line
		if seen[k.Value] {
			probs = append(probs, Problem{Line: k.Line, Prototype: p.Name, Field: k.Value, Message: "given twice"})
			continue
		}
		seen[k.Value] = true
		var target any
		switch k.Value {
		case "name":
			target = &p.Name
		case "role":
			target = &p.Role
		case "description":
			target = &p.Description
		case "kind":
			target = &p.Kind
		case "system_prompt":
			target = &p.SystemPrompt
		case "model":
			target = &p.Model
		case "tools":
			target = &p.Tools
		case "mcp_servers":
			target = &p.MCPServers
		case "subagents":
			target = &p.Subagents
		case "permissions":
			p.Permissions = &Permissions{}
			target = p.Permissions
		case "schedule":
			p.Schedule = &PrototypeSchedule{}
			target = p.Schedule
		case "flow":
			p.Flow = &PrototypeFlow{}
			target = p.Flow
		default:
			probs = append(probs, Problem{Line: k.Line, Prototype: p.Name, Message: fmt.Sprintf("unknown field %q", k.Value)})
			continue
		}
		if err := decodeStrict(v, target); err != nil {
			probs = append(probs, Problem{Line: v.Line, Prototype: p.Name, Field: k.Value, Message: err.Error()})
		}
	}
	return p, l, probs
}

// decodeStrict decodes n into target, refusing fields target does not
// have (yaml's Node.Decode lets them pass).
func decodeStrict(n *yaml.Node, target any) error {
	b, err := yaml.Marshal(n)
	if err != nil {
		return err
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(target); err != nil {
		var te *yaml.TypeError
		if errors.As(err, &te) && len(te.Errors) > 0 {
			return errors.New(stripLine(te.Errors[0]))
		}
		return errors.New(stripLine(err.Error()))
	}
	return nil
}

// syntaxProblem returns the problem of err, the error of decoding data as
// YAML, on the line where it is. The YAML parser reports the line where the
// construct the error is in begins, or the one before (for an indent
// error on line 3, "line 1"): the line is rather the first line ending a
// prefix of data that fails with the same message, found by bisection
// (the parser reads in order: a prefix that holds the error fails with
// it, a shorter one does not or fails otherwise, at its end).
func syntaxProblem(data []byte, err error) Problem {
	msg := stripLine(err.Error())
	ends := []int{} // the end of each line
	for i, c := range data {
		if c == '\n' {
			ends = append(ends, i+1)
		}
	}
	if len(data) > 0 && data[len(data)-1] != '\n' {
		ends = append(ends, len(data))
	}
	fails := func(k int) bool { // the first k lines fail with msg
		var n yaml.Node
		err := yaml.Unmarshal(data[:ends[k-1]], &n)
		return err != nil && stripLine(err.Error()) == msg
	}
	lo, hi := 1, len(ends)
	if hi == 0 || !fails(hi) {
		return Problem{Message: msg}
	}
	for lo < hi {
		mid := (lo + hi) / 2
		if fails(mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return Problem{Line: lo, Message: msg}
}

// stripLine drops yaml's "line N: " of a re-encoded node, whose lines are
// not the file's.
func stripLine(msg string) string {
	msg = trimPrefix(msg, "yaml: ")
	var n int
	if _, err := fmt.Sscanf(msg, "line %d:", &n); err == nil {
		if i := bytes.IndexByte([]byte(msg), ':'); i >= 0 {
			msg = msg[i+1:]
		}
	}
	return trimPrefix(msg, " ")
}

func trimPrefix(s, p string) string {
	if len(s) >= len(p) && s[:len(p)] == p {
		return s[len(p):]
	}
	return s
}
