package docmem

import (
	"context"
	"encoding/json"

	"github.com/calf-go/calf/conversation/host"
)

// CodeHandler returns the docmem agent: the [host.CodeHandler] that
// serves the instances of the docmem prototype on a [host.Host].
// A message's command, in the argument form (["docmem-create",
// "project-notes"], see [CommandFromArgs]), or else its text, a JSON
// command, is applied to the documents of the message's conversation; the
// answer is the [Result] as JSON. The command's id is the message's
// correlation id (or, without one, its id on the broker), so that a
// message delivered again has one effect: it answers with the first
// result, marked duplicate.
func (m *Memory) CodeHandler() host.CodeHandler {
	return func(ctx context.Context, req host.CodeRequest) (string, error) {
		id := req.Message.CorrelationID
		if id == "" {
			id = req.ID
		}
		var c Command
		var err error
		if len(req.Message.Command) > 0 {
			c, err = CommandFromArgs(req.Message.Command, id)
		} else {
			c, err = parseWithID([]byte(req.Message.Message), id)
		}
		var res Result
		if err != nil {
			res = failed(c, err)
		} else if res, err = m.Apply(ctx, req.Instance.Conversation, c); err != nil {
			return "", err
		}
		data, err := json.Marshal(res)
		return string(data), err
	}
}

// parseWithID parses a JSON command, with id as its id when it has none.
func parseWithID(data []byte, id string) (Command, error) {
	var fields map[string]json.RawMessage
	if json.Unmarshal(data, &fields) == nil && fields != nil && fields["id"] == nil && len(id) <= MaxIDLen {
		fields["id"], _ = json.Marshal(id)
		if d, err := json.Marshal(fields); err == nil {
			data = d
		}
	}
	return ParseCommand(data)
}
