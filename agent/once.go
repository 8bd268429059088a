package agent

import (
	"github.com/calf-go/calf/model"
)

// unsavedResult is a tool call's result, kept until it is recorded.
type unsavedResult struct {
	ev   ToolResultEvent
	data []byte // ev encoded
}

// unsavedResponse is a model's response, kept until it is recorded.
type unsavedResponse struct {
	resp   *model.Response
	deltas int
}
