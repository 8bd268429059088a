package docmem

import (
	"strconv"
	"strings"
)

// positional are the arguments of each command in the argument form, in
// order; those after the '|' are optional.
var positional = map[string]string{
	CmdCreate:  "doc|text",
	CmdAppend:  "doc parent text|node",
	CmdInsert:  "doc parent index text|node",
	CmdUpdate:  "doc node text",
	CmdDelete:  "doc node",
	CmdMove:    "doc node parent|index",
	CmdRead:    "doc|node",
	CmdOutline: "doc",
	CmdFind:    "doc text",
	CmdList:    "",
}

// CommandFromArgs makes a command of the argument form a conversation
// message carries in its command field (the seed's
// ["docmem-create", "project-notes"]): the command's name, with or
// without a "docmem-" prefix, then its arguments in this order, the
// bracketed ones optional:
//
//	create  DOC [TITLE]
//	append  DOC PARENT TEXT [NODE]
//	insert  DOC PARENT INDEX TEXT [NODE]
//	update  DOC NODE TEXT
//	delete  DOC NODE
//	move    DOC NODE PARENT [INDEX]
//	read    DOC [NODE]
//	outline DOC
//	find    DOC TEXT
//	list
//
// id is the command's id, such as the message's correlation id. The
// command is validated as [ParseCommand] does.
func CommandFromArgs(args []string, id string) (Command, error) {
	if len(args) == 0 {
		return Command{}, newError(CodeUnknownCommand, "an empty command")
	}
	name := strings.TrimPrefix(args[0], "docmem-")
	spec, ok := positional[name]
	if !ok {
		return Command{}, newError(CodeUnknownCommand, "unknown command %q (want create, append, insert, update, delete, move, read, outline, find or list)", clip(args[0]))
	}
	required, optional, _ := strings.Cut(spec, "|")
	names := append(strings.Fields(required), strings.Fields(optional)...)
	args = args[1:]
	if n := len(strings.Fields(required)); len(args) < n {
		return Command{}, newError(CodeMissingArgument, "%s needs %s", name, strings.Join(strings.Fields(required)[len(args):], ", "))
	}
	if len(args) > len(names) {
		return Command{}, newError(CodeInvalidArgument, "%s takes at most %d arguments, not %d", name, len(names), len(args))
	}
	c := Command{Command: name, ID: id}
	for i, v := range args {
		switch names[i] {
		case "doc":
			c.Doc = v
		case "parent":
			c.Parent = v
		case "node":
			c.Node = v
		case "text":
			c.Text = v
		case "index":
			n, err := strconv.Atoi(v)
			if err != nil {
				return Command{}, newError(CodeInvalidArgument, "index %q is not a number", clip(v))
			}
			c.Index = &n
		}
	}
	if err := c.Validate(); err != nil {
		return Command{}, err
	}
	return c, nil
}
