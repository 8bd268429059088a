package docmem

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/calf-go/calf/internal/convid"
	"github.com/calf-go/calf/store"
)

// KindDocument is the record kind of documents: one record per document,
// id "{conversation}/{doc}", its whole tree and the ids of its latest
// commands as JSON.
const KindDocument = "docmem"

// Result is what a command returns, as JSON. A command that failed has OK
// false, and Code and Error say why; nothing changed.
type Result struct {
	OK      bool   `json:"ok"`
	Command string `json:"command"`
	// ID is the command's id.
	ID  string `json:"id,omitempty"`
	Doc string `json:"doc,omitempty"`
	// Node is the node the command made or changed.
	Node string `json:"node,omitempty"`
	// Text is a read's Markdown or an outline.
	Text string `json:"text,omitempty"`
	// Matches are what find found, in document order.
	Matches []Match `json:"matches,omitempty"`
	// Docs are the conversation's documents (list).
	Docs []string `json:"docs,omitempty"`
	// Duplicate says the command had been applied before: this is that
	// application's result, and nothing changed now.
	Duplicate bool   `json:"duplicate,omitempty"`
	Code      Code   `json:"code,omitempty"`
	Error     string `json:"error,omitempty"`
}

// Err returns the result's error as an [*Error], or nil when it is OK.
func (r *Result) Err() error {
	if r.OK {
		return nil
	}
	return &Error{Code: r.Code, Message: r.Error}
}

// Match is a node that find found.
type Match struct {
	Node string `json:"node"`
	// Text is the node's text, clipped to 160 bytes.
	Text string `json:"text"`
}

// document is a document's record.
type document struct {
	Name    string           `json:"name"`
	Created time.Time        `json:"created"`
	Updated time.Time        `json:"updated"`
	Next    int              `json:"next"` // the number of the next node id the document chooses
	Nodes   map[string]*node `json:"nodes"`
	// Applied are the latest commands applied, oldest first, at most
	// MaxApplied.
	Applied []applied `json:"applied,omitempty"`
}

type node struct {
	Text     string   `json:"text"`
	Parent   string   `json:"parent,omitempty"`
	Children []string `json:"children,omitempty"`
}

type applied struct {
	ID     string `json:"id"`
	Digest string `json:"digest"` // of the command, to tell a reused id
	Node   string `json:"node,omitempty"`
}

// Memory keeps the documents of conversations in a store.
type Memory struct {
	s   store.Store
	now func() time.Time
}

// Options configure [New]. Nil means the defaults.
type Options struct {
	// Now returns the time. Default time.Now.
	Now func() time.Time
}

// New returns the documents kept in s.
func New(s store.Store, opts *Options) *Memory {
	m := &Memory{s: s, now: time.Now}
	if opts != nil && opts.Now != nil {
		m.now = opts.Now
	}
	return m
}

// Handle parses a command from JSON ([ParseCommand]) and applies it to the
// conversation's documents ([Memory.Apply]). A command that does not
// parse gives a result with its error.
func (m *Memory) Handle(ctx context.Context, conv string, data []byte) (Result, error) {
	c, err := ParseCommand(data)
	if err != nil {
		return failed(Command{}, err), nil
	}
	return m.Apply(ctx, conv, c)
}

// Apply validates c and applies it to the documents of conversation conv.
// The command's own errors (an unknown node, a missing argument, a
// document too large) are in the result, with nothing changed; the error
// returned is the store's or ctx's, after which the command may be
// applied again: changes are idempotent by their command id. Two writers
// on one document take turns by compare-and-swap.
func (m *Memory) Apply(ctx context.Context, conv string, c Command) (Result, error) {
	if err := convid.CheckConversationID(conv); err != nil {
		return Result{}, err
	}
	if err := c.Validate(); err != nil {
		return failed(c, err), nil
	}
	if c.Command == CmdList {
		return m.list(ctx, conv, c)
	}
	key := conv + "/" + c.Doc
	if !c.Mutates() {
		rec, err := m.s.Get(ctx, KindDocument, key)
		if errors.Is(err, store.ErrNotFound) {
			return failed(c, newError(CodeUnknownDocument, "no document %q", c.Doc)), nil
		}
		if err != nil {
			return Result{}, err
		}
		var d document
		if err := json.Unmarshal(rec.Data, &d); err != nil {
			return Result{}, fmt.Errorf("docmem: document %s: %w", key, err)
		}
		res, err := d.read(c)
		if err != nil {
			return failed(c, err), nil
		}
		return res, nil
	}
	digest := digestOf(c)
	var res Result
	update := func(data []byte, exists bool) ([]byte, error) {
		res = Result{OK: true, Command: c.Command, ID: c.ID, Doc: c.Doc}
		var d document
		if exists {
			if err := json.Unmarshal(data, &d); err != nil {
				return nil, fmt.Errorf("docmem: document %s: %w", key, err)
			}
			for _, a := range d.Applied {
				if a.ID != c.ID {
					continue
				}
				if a.Digest != digest {
					return nil, newError(CodeIDReused, "command id %q was used before for another command", c.ID)
				}
				res.Node, res.Duplicate = a.Node, true
				return nil, nil
			}
		}
		switch {
		case c.Command == CmdCreate && exists:
			return nil, newError(CodeDocumentExists, "document %q exists", c.Doc)
		case c.Command == CmdCreate:
			if err := checkID("doc", c.Doc); err != nil {
				return nil, err
			}
			d = document{Name: c.Doc, Created: m.now().UTC(), Next: 1, Nodes: map[string]*node{Root: {Text: c.Text}}}
			res.Node = Root
		case !exists:
			return nil, newError(CodeUnknownDocument, "no document %q", c.Doc)
		default:
			node, err := d.change(c)
			if err != nil {
				return nil, err
			}
			res.Node = node
		}
		d.Updated = m.now().UTC()
		d.Applied = append(d.Applied, applied{ID: c.ID, Digest: digest, Node: res.Node})
		if n := len(d.Applied) - MaxApplied; n > 0 {
			d.Applied = slices.Delete(d.Applied, 0, n)
		}
		out, err := json.Marshal(d)
		if err != nil {
			return nil, err
		}
		if len(out) > MaxDocumentBytes {
			return nil, newError(CodeTooLarge, "the document would be %d bytes (at most %d)", len(out), MaxDocumentBytes)
		}
		return out, nil
	}
	var err error
	if c.Command == CmdCreate {
		_, err = store.CreateOrUpdate(ctx, m.s, KindDocument, key, update)
	} else {
		_, err = store.Update(ctx, m.s, KindDocument, key, update)
	}
	var cerr *Error
	if errors.As(err, &cerr) {
		return failed(c, cerr), nil
	}
	if err != nil {
		return Result{}, err
	}
	return res, nil
}

func failed(c Command, err error) Result {
	r := Result{Command: c.Command, ID: c.ID, Doc: c.Doc, Error: err.Error(), Code: CodeInvalidArgument}
	var e *Error
	if errors.As(err, &e) {
		r.Code, r.Error = e.Code, e.Message
	}
	return r
}

func digestOf(c Command) string {
	b, _ := json.Marshal(c)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

func (m *Memory) list(ctx context.Context, conv string, c Command) (Result, error) {
	res := Result{OK: true, Command: c.Command, ID: c.ID}
	prefix := conv + "/"
	for after := ""; ; {
		recs, err := m.s.List(ctx, KindDocument, prefix, after, 100)
		if err != nil {
			return Result{}, err
		}
		for _, r := range recs {
			res.Docs = append(res.Docs, strings.TrimPrefix(r.ID, prefix))
		}
		if len(recs) < 100 {
			return res, nil
		}
		after = recs[len(recs)-1].ID
	}
}

// depth returns the depth of id: 0 for the root.
func (d *document) depth(id string) int {
	n := 0
	for id != Root {
		id = d.Nodes[id].Parent
		n++
	}
	return n
}

// height returns the levels of id's subtree below it: 0 for a leaf.
func (d *document) height(id string) int {
	h := 0
	for _, c := range d.Nodes[id].Children {
		h = max(h, 1+d.height(c))
	}
	return h
}

// within reports whether id is top or in top's subtree.
func (d *document) within(id, top string) bool {
	for {
		if id == top {
			return true
		}
		if id == Root {
			return false
		}
		id = d.Nodes[id].Parent
	}
}

func (d *document) need(id string) (*node, error) {
	n, ok := d.Nodes[id]
	if !ok {
		return nil, newError(CodeUnknownNode, "no node %q in document %q", id, d.Name)
	}
	return n, nil
}

// change applies a changing command other than create, and returns the
// node it made or changed.
func (d *document) change(c Command) (string, error) {
	switch c.Command {
	case CmdAppend, CmdInsert:
		parent, err := d.need(c.Parent)
		if err != nil {
			return "", err
		}
		if len(d.Nodes) >= MaxNodes {
			return "", newError(CodeTooLarge, "document %q has %d nodes (at most %d)", d.Name, len(d.Nodes), MaxNodes)
		}
		if d.depth(c.Parent)+1 > MaxDepth {
			return "", newError(CodeTooDeep, "a node under %q would be deeper than %d levels", c.Parent, MaxDepth)
		}
		at := len(parent.Children)
		if c.Command == CmdInsert {
			if *c.Index > at {
				return "", newError(CodeInvalidArgument, "index %d: %q has %d children", *c.Index, c.Parent, at)
			}
			at = *c.Index
		}
		id := c.Node
		if id == "" {
			for {
				id = "n" + strconv.Itoa(d.Next)
				d.Next++
				if _, taken := d.Nodes[id]; !taken {
					break
				}
			}
		} else if _, taken := d.Nodes[id]; taken {
			return "", newError(CodeNodeExists, "node %q exists", id)
		}
		d.Nodes[id] = &node{Text: c.Text, Parent: c.Parent}
		parent.Children = slices.Insert(parent.Children, at, id)
		return id, nil
	case CmdUpdate:
		n, err := d.need(c.Node)
		if err != nil {
			return "", err
		}
		n.Text = c.Text
		return c.Node, nil
	case CmdDelete:
		n, err := d.need(c.Node)
		if err != nil {
			return "", err
		}
		if c.Node == Root {
			return "", newError(CodeMoveIntoItself, "the root cannot be deleted")
		}
		p := d.Nodes[n.Parent]
		p.Children = slices.DeleteFunc(p.Children, func(s string) bool { return s == c.Node })
		var drop func(string)
		drop = func(id string) {
			for _, ch := range d.Nodes[id].Children {
				drop(ch)
			}
			delete(d.Nodes, id)
		}
		drop(c.Node)
		return c.Node, nil
	case CmdMove:
		n, err := d.need(c.Node)
		if err != nil {
			return "", err
		}
		np, err := d.need(c.Parent)
		if err != nil {
			return "", err
		}
		if c.Node == Root {
			return "", newError(CodeMoveIntoItself, "the root cannot be moved")
		}
		if d.within(c.Parent, c.Node) {
			return "", newError(CodeMoveIntoItself, "node %q cannot move under itself (%q is in its subtree)", c.Node, c.Parent)
		}
		if d.depth(c.Parent)+1+d.height(c.Node) > MaxDepth {
			return "", newError(CodeTooDeep, "node %q under %q would reach deeper than %d levels", c.Node, c.Parent, MaxDepth)
		}
		// An error from here on leaves the record as it was: the
		// document is decoded afresh for each attempt.
		old := d.Nodes[n.Parent]
		old.Children = slices.DeleteFunc(old.Children, func(s string) bool { return s == c.Node })
		at := len(np.Children)
		if c.Index != nil {
			if *c.Index > at {
				return "", newError(CodeInvalidArgument, "index %d: %q has %d children", *c.Index, c.Parent, at)
			}
			at = *c.Index
		}
		np.Children = slices.Insert(np.Children, at, c.Node)
		n.Parent = c.Parent
		return c.Node, nil
	}
	return "", newError(CodeUnknownCommand, "unknown command %q", c.Command)
}

// read answers read, outline and find.
func (d *document) read(c Command) (Result, error) {
	res := Result{OK: true, Command: c.Command, ID: c.ID, Doc: c.Doc}
	switch c.Command {
	case CmdRead:
		top := c.Node
		if top == "" {
			top = Root
		}
		if _, err := d.need(top); err != nil {
			return res, err
		}
		var b strings.Builder
		d.markdown(&b, top, 1)
		res.Node, res.Text = top, strings.TrimRight(b.String(), "\n")+"\n"
	case CmdOutline:
		var b strings.Builder
		d.outline(&b, Root, 0)
		res.Text = b.String()
	case CmdFind:
		q := strings.ToLower(c.Text)
		d.walk(Root, func(id string, n *node) bool {
			if strings.Contains(strings.ToLower(n.Text), q) {
				res.Matches = append(res.Matches, Match{Node: id, Text: clipText(n.Text, 160)})
			}
			return len(res.Matches) < MaxMatches
		})
	}
	return res, nil
}

// walk visits the subtree of id in document order until f returns false.
func (d *document) walk(id string, f func(string, *node) bool) bool {
	n := d.Nodes[id]
	if !f(id, n) {
		return false
	}
	for _, ch := range n.Children {
		if !d.walk(ch, f) {
			return false
		}
	}
	return true
}

// markdown writes the subtree of id: a node with children (and the top
// node) as a heading of its level, its first line the heading and the rest
// a paragraph; a leaf as a paragraph.
func (d *document) markdown(b *strings.Builder, id string, level int) {
	n := d.Nodes[id]
	if len(n.Children) > 0 || level == 1 {
		head, rest, _ := strings.Cut(n.Text, "\n")
		if head == "" {
			head = id
		}
		b.WriteString(strings.Repeat("#", min(level, 6)) + " " + head + "\n\n")
		if rest = strings.TrimSpace(rest); rest != "" {
			b.WriteString(rest + "\n\n")
		}
	} else {
		b.WriteString(strings.TrimSpace(n.Text) + "\n\n")
	}
	for _, ch := range n.Children {
		d.markdown(b, ch, level+1)
	}
}

func (d *document) outline(b *strings.Builder, id string, depth int) {
	n := d.Nodes[id]
	head, _, _ := strings.Cut(n.Text, "\n")
	fmt.Fprintf(b, "%s- [%s] %s\n", strings.Repeat("  ", depth), id, clipText(head, 80))
	for _, ch := range n.Children {
		d.outline(b, ch, depth+1)
	}
}

// clipText cuts s to at most n bytes at a character boundary.
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !isStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func isStart(b byte) bool { return b&0xc0 != 0x80 }
