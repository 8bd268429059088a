// Package runblock reads the "# Run" blocks of a model's text: the form in
// which a model without tool calling asks the conversation host for what
// the start_conversation and send tools do.
package runblock

import (
	"fmt"
	"strings"

	"github.com/calf-go/calf/internal/convid"
)

// The verbs of a "# Run" block.
const (
	// VerbStartConversation starts the instance of a prototype in the
	// conversation, with its topic: start-conversation PROTOTYPE.
	VerbStartConversation = "start-conversation"
	// VerbSend sends a command to an agent of the conversation: send AGENT
	// WORD... (AGENT is a prototype's name or an instance's id).
	VerbSend = "send"
)

// Bounds of a "# Run" block, so that a model's text cannot make the
// framework do unbounded work.
const (
	// MaxCommands bounds the commands of one text's blocks.
	MaxCommands = 32
	// MaxLine bounds a command line, in bytes.
	MaxLine = 8 << 10
)

// The inputs of the runs that carry on after a "# Run" block: the block's
// results, or its problems. They are the framework's, not the sender's.
const (
	ResultsPrefix  = "Results of your # Run block:\n"
	ProblemsPrefix = "Your # Run block was not carried out:\n"
)

// Command is one command of a "# Run" block ([Parse]). Its fields are
// on the wire without tags (the host's runblock channel): do not rename
// them.
type Command struct {
	// Verb is [VerbStartConversation] or [VerbSend].
	Verb string
	// Target is the prototype to start, or the agent to send to.
	Target string
	// Args are the words of the command sent, for [VerbSend]: the
	// message's command (ConversationMessage.Command).
	Args []string
	// Line is the command's line in the text, from 1.
	Line int
}

// Error lists what is wrong with the "# Run" blocks of a text, every
// problem with its line; nothing of the blocks is to be carried out.
type Error struct {
	Problems []Problem
}

// Problem is one thing wrong with a block: its line in the text, from 1,
// and what is wrong.
type Problem struct {
	Line    int
	Message string
}

// Error implements error.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("conversation: # Run block: ")
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "line %d: %s", p.Line, p.Message)
	}
	return b.String()
}

// Parse finds the "# Run" blocks of a model's text: the form in which a
// model without tool calling asks for what the start_conversation and
// send tools do. A block is a line "# Run" (any heading level, any case),
// then one command a line, up to a blank line, another heading or the
// end; the commands may also stand in a fenced code block right after
// the heading, up to its closing fence:
//
//	# Run
//	start-conversation docmem-agent
//	send docmem-agent docmem-create project-notes
//	send docmem-agent docmem-append project-notes root "A note, with spaces"
//
// A command's words are split as a shell splits them, without expansion:
// single quotes keep everything literally, double quotes keep all but a
// backslash before " or \, and a backslash outside quotes keeps the next
// character. rest is the text without its blocks (trimmed): what the user
// sees. A text without blocks gives no commands and itself as rest.
//
// err is a [*Error] listing every problem (an unknown verb, a missing
// target or command, an unterminated quote, a line longer than
// [MaxLine], more than [MaxCommands] commands, or more than
// [convid.MaxCommandArgs] words sent); cmds is then nil.
func Parse(text string) (cmds []Command, rest string, err error) {
	lines := strings.Split(text, "\n")
	var kept []string
	var problems []Problem
	bad := func(line int, format string, args ...any) {
		problems = append(problems, Problem{Line: line, Message: fmt.Sprintf(format, args...)})
	}
	for i := 0; i < len(lines); i++ {
		if !isRunHeading(lines[i]) {
			kept = append(kept, lines[i])
			continue
		}
		head := i + 1
		before := len(cmds) + len(problems)
		fenced := false
		j := i + 1
		if j < len(lines) && strings.HasPrefix(strings.TrimSpace(lines[j]), "```") {
			fenced = true
			j++
		}
		for ; j < len(lines); j++ {
			raw := strings.TrimRight(lines[j], "\r")
			trimmed := strings.TrimSpace(raw)
			if fenced {
				if strings.HasPrefix(trimmed, "```") {
					fenced = false
					j++
					break
				}
			} else if trimmed == "" || strings.HasPrefix(trimmed, "#") {
				break
			}
			if trimmed == "" {
				continue
			}
			n := j + 1
			if len(raw) > MaxLine {
				bad(n, "the command is longer than %d bytes", MaxLine)
				continue
			}
			words, err := splitWords(trimmed)
			if err != nil {
				bad(n, "%v", err)
				continue
			}
			c := Command{Verb: words[0], Line: n}
			switch c.Verb {
			case VerbStartConversation:
				if len(words) != 2 {
					bad(n, "start-conversation takes one prototype, not %d words", len(words)-1)
					continue
				}
				c.Target = words[1]
			case VerbSend:
				if len(words) < 3 {
					bad(n, "send needs an agent and a command: send AGENT WORD...")
					continue
				}
				if len(words)-2 > convid.MaxCommandArgs {
					bad(n, "the command sent has %d words, more than %d", len(words)-2, convid.MaxCommandArgs)
					continue
				}
				c.Target, c.Args = words[1], words[2:]
			default:
				bad(n, "unknown command %q (want %s or %s)", clipWord(c.Verb), VerbStartConversation, VerbSend)
				continue
			}
			if len(cmds) == MaxCommands {
				bad(n, "more than %d commands", MaxCommands)
				continue
			}
			cmds = append(cmds, c)
		}
		if fenced {
			bad(head, "the code block after the heading is not closed")
		} else if len(cmds)+len(problems) == before {
			bad(head, "an empty # Run block")
		}
		i = j - 1
	}
	rest = strings.TrimSpace(strings.Join(kept, "\n"))
	if len(problems) > 0 {
		return nil, rest, &Error{Problems: problems}
	}
	return cmds, rest, nil
}

// isRunHeading reports a Markdown heading whose text is "Run".
func isRunHeading(line string) bool {
	s := strings.TrimSpace(line)
	t := strings.TrimLeft(s, "#")
	if len(t) == len(s) || len(s)-len(t) > 6 {
		return false
	}
	if t != "" && t[0] != ' ' && t[0] != '\t' {
		return false
	}
	return strings.EqualFold(strings.TrimSpace(t), "run")
}

// splitWords splits a command line into words, as a shell does without
// expanding anything.
func splitWords(s string) ([]string, error) {
	var words []string
	var w strings.Builder
	in := false // inside a word
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			if in {
				words = append(words, w.String())
				w.Reset()
				in = false
			}
		case c == '\'':
			in = true
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				return nil, fmt.Errorf("an unterminated ' quote")
			}
			w.WriteString(s[i+1 : i+1+end])
			i += end + 1
		case c == '"':
			in = true
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && (s[i+1] == '"' || s[i+1] == '\\') {
					i++
				}
				w.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, fmt.Errorf("an unterminated \" quote")
			}
		case c == '\\':
			in = true
			if i+1 < len(s) {
				i++
				w.WriteByte(s[i])
			}
		default:
			in = true
			w.WriteByte(c)
		}
	}
	if in {
		words = append(words, w.String())
	}
	if len(words) == 0 {
		return nil, fmt.Errorf("an empty command")
	}
	return words, nil
}

// clipWord shortens a word quoted in an error.
func clipWord(s string) string {
	if r := []rune(s); len(r) > 40 {
		return string(r[:40]) + "…"
	}
	return s
}
