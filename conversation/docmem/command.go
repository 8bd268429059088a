package docmem

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"unicode"
	"unicode/utf8"
)

// Bounds of commands and documents. Input over a bound is refused with an
// error result and changes nothing.
const (
	// MaxTextBytes bounds a node's text.
	MaxTextBytes = 16 << 10
	// MaxQueryBytes bounds the text a find command looks for.
	MaxQueryBytes = 1 << 10
	// MaxIDLen bounds a command id, a document's name and a node id.
	MaxIDLen = 128
	// MaxDepth bounds the depth of a node: the root is at depth 0.
	MaxDepth = 16
	// MaxNodes bounds the nodes of a document, its root included.
	MaxNodes = 2000
	// MaxDocumentBytes bounds a document's record.
	MaxDocumentBytes = 512 << 10
	// MaxApplied is how many of a document's latest command ids it keeps
	// to recognise a command delivered again: a command redelivered after
	// MaxApplied newer commands on its document is applied again.
	MaxApplied = 256
	// MaxCommandBytes bounds a command's JSON: room for a text of
	// MaxTextBytes with every character escaped.
	MaxCommandBytes = 6*MaxTextBytes + 4<<10
	// MaxMatches bounds the matches a find command returns.
	MaxMatches = 50
)

// The commands.
const (
	CmdCreate  = "create"  // create a document: doc, text (its title)
	CmdAppend  = "append"  // add a node as the last child of parent: doc, parent, text [, node]
	CmdInsert  = "insert"  // add a node at index among parent's children: doc, parent, index, text [, node]
	CmdUpdate  = "update"  // replace a node's text: doc, node, text
	CmdDelete  = "delete"  // delete a node and its subtree: doc, node
	CmdMove    = "move"    // move a node and its subtree under parent [at index]: doc, node, parent [, index]
	CmdRead    = "read"    // a subtree as Markdown: doc [, node]
	CmdOutline = "outline" // the tree of node ids and first lines: doc
	CmdFind    = "find"    // the nodes whose text holds text, case folded: doc, text
	CmdList    = "list"    // the conversation's documents
)

var commands = map[string]struct{ mutates bool }{
	CmdCreate: {true}, CmdAppend: {true}, CmdInsert: {true}, CmdUpdate: {true}, CmdDelete: {true}, CmdMove: {true},
	CmdRead: {}, CmdOutline: {}, CmdFind: {}, CmdList: {},
}

// Root is the id of a document's root node, whose text is the title.
const Root = "root"

// Command is one docmem command, as JSON:
//
//	{"command": "append", "id": "c-7", "doc": "project-notes",
//	 "parent": "root", "text": "Decisions"}
//
// Commands that change a document (create, append, insert, update,
// delete, move) carry an id: a command applied twice, as when it is
// delivered again, has one effect, and the second application returns the
// first one's result. Reading commands need none.
type Command struct {
	Command string `json:"command"`
	// ID identifies the command, for idempotency.
	ID string `json:"id,omitempty"`
	// Doc names the document.
	Doc string `json:"doc,omitempty"`
	// Node is the node acted on; for append and insert, the id of the new
	// node (default: one the document chooses, "n1", "n2", ...).
	Node string `json:"node,omitempty"`
	// Parent is the node under which append, insert and move put a node.
	Parent string `json:"parent,omitempty"`
	// Index is the position among the parent's children (insert; move,
	// where the default is the end). 0 is the first.
	Index *int `json:"index,omitempty"`
	// Text is a title (create), a node's text (append, insert, update) or
	// what to find (find).
	Text string `json:"text,omitempty"`
}

// Mutates reports whether the command changes a document.
func (c *Command) Mutates() bool { return commands[c.Command].mutates }

// ParseCommand decodes a command from JSON and validates it
// ([Command.Validate]). Input over [MaxCommandBytes], not one JSON
// object, or with fields a command does not have is refused.
func ParseCommand(data []byte) (Command, error) {
	if len(data) > MaxCommandBytes {
		return Command{}, newError(CodeTooLarge, "a command of %d bytes (at most %d)", len(data), MaxCommandBytes)
	}
	var c Command
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return Command{}, newError(CodeInvalidArgument, "not a command: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Command{}, newError(CodeInvalidArgument, "not a command: data after the JSON object")
	}
	if err := c.Validate(); err != nil {
		return Command{}, err
	}
	return c, nil
}

// Validate reports what makes c no valid command, as an [*Error]: an
// unknown command, a missing argument, an id or a text that is not
// acceptable. Whether its nodes exist is for the document to say.
func (c *Command) Validate() error {
	spec, ok := commands[c.Command]
	if !ok {
		return newError(CodeUnknownCommand, "unknown command %q (want create, append, insert, update, delete, move, read, outline, find or list)", clip(c.Command))
	}
	need := func(field, v string) error {
		if v == "" {
			return newError(CodeMissingArgument, "%s needs %s", c.Command, field)
		}
		return checkID(field, v)
	}
	if spec.mutates {
		if err := need("id", c.ID); err != nil {
			return err
		}
	} else if c.ID != "" {
		if err := checkID("id", c.ID); err != nil {
			return err
		}
	}
	if c.Command != CmdList {
		if err := need("doc", c.Doc); err != nil {
			return err
		}
	}
	for _, f := range [...]struct{ name, v string }{{"node", c.Node}, {"parent", c.Parent}} {
		if f.v != "" {
			if err := checkID(f.name, f.v); err != nil {
				return err
			}
		}
	}
	switch c.Command {
	case CmdAppend, CmdInsert:
		if err := need("parent", c.Parent); err != nil {
			return err
		}
		if c.Text == "" {
			return newError(CodeMissingArgument, "%s needs text", c.Command)
		}
		if c.Command == CmdInsert && c.Index == nil {
			return newError(CodeMissingArgument, "insert needs index")
		}
	case CmdUpdate:
		if err := need("node", c.Node); err != nil {
			return err
		}
		if c.Text == "" {
			return newError(CodeMissingArgument, "update needs text")
		}
	case CmdDelete:
		if err := need("node", c.Node); err != nil {
			return err
		}
	case CmdMove:
		if err := need("node", c.Node); err != nil {
			return err
		}
		if err := need("parent", c.Parent); err != nil {
			return err
		}
	case CmdFind:
		if c.Text == "" {
			return newError(CodeMissingArgument, "find needs text")
		}
		if len(c.Text) > MaxQueryBytes {
			return newError(CodeTooLarge, "find: a text of %d bytes (at most %d)", len(c.Text), MaxQueryBytes)
		}
	}
	if c.Index != nil && *c.Index < 0 {
		return newError(CodeInvalidArgument, "index %d is negative", *c.Index)
	}
	return checkText(c.Text)
}

// checkID refuses an id that is too long, not UTF-8, or holds a control
// character.
func checkID(field, v string) error {
	if len(v) > MaxIDLen {
		return newError(CodeInvalidArgument, "%s is longer than %d bytes", field, MaxIDLen)
	}
	if !utf8.ValidString(v) {
		return newError(CodeInvalidArgument, "%s is not UTF-8", field)
	}
	for _, r := range v {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			return newError(CodeInvalidArgument, "%s %q holds the control character %U", field, v, r)
		}
	}
	return nil
}

// checkText refuses a text over [MaxTextBytes], not UTF-8, or with
// control characters other than newline, tab and carriage return.
func checkText(v string) error {
	if len(v) > MaxTextBytes {
		return newError(CodeTooLarge, "a text of %d bytes (at most %d)", len(v), MaxTextBytes)
	}
	if !utf8.ValidString(v) {
		return newError(CodeInvalidArgument, "the text is not UTF-8")
	}
	for _, r := range v {
		if unicode.IsControl(r) && r != '\n' && r != '\t' && r != '\r' {
			return newError(CodeInvalidArgument, "the text holds the control character %U", r)
		}
	}
	return nil
}

func clip(s string) string {
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return s
}

// Code names the kind of an [Error].
type Code string

// The codes of errors.
const (
	CodeUnknownCommand  Code = "unknown_command"
	CodeMissingArgument Code = "missing_argument"
	CodeInvalidArgument Code = "invalid_argument"
	CodeUnknownDocument Code = "unknown_document"
	CodeUnknownNode     Code = "unknown_node"
	CodeDocumentExists  Code = "document_exists"
	CodeNodeExists      Code = "node_exists"
	// CodeMoveIntoItself: a node moved under itself or its own subtree,
	// or the root moved or deleted.
	CodeMoveIntoItself Code = "move_into_itself"
	CodeTooLarge       Code = "too_large"
	CodeTooDeep        Code = "too_deep"
	// CodeIDReused: a command id applied before, to another command.
	CodeIDReused Code = "id_reused"
)

// Error is a command's error: its [Code] and a message for the model or
// the person who sent it. Errors match the sentinels of their code with
// errors.Is.
type Error struct {
	Code    Code
	Message string
}

// Error returns "docmem: CODE: MESSAGE".
func (e *Error) Error() string { return "docmem: " + string(e.Code) + ": " + e.Message }

// Is reports whether target is an *Error of the same code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

func newError(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Sentinels of the codes, for errors.Is.
var (
	ErrUnknownCommand  = &Error{Code: CodeUnknownCommand}
	ErrMissingArgument = &Error{Code: CodeMissingArgument}
	ErrInvalidArgument = &Error{Code: CodeInvalidArgument}
	ErrUnknownDocument = &Error{Code: CodeUnknownDocument}
	ErrUnknownNode     = &Error{Code: CodeUnknownNode}
	ErrDocumentExists  = &Error{Code: CodeDocumentExists}
	ErrNodeExists      = &Error{Code: CodeNodeExists}
	ErrMoveIntoItself  = &Error{Code: CodeMoveIntoItself}
	ErrTooLarge        = &Error{Code: CodeTooLarge}
	ErrTooDeep         = &Error{Code: CodeTooDeep}
	ErrIDReused        = &Error{Code: CodeIDReused}
)
