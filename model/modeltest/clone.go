package modeltest

import (
	"bytes"
	"encoding/json"

	"github.com/calf-go/calf/model"
)

// cloneRequest returns a deep copy of req, so that a recorded request is
// not changed by a caller that reuses its slices.
func cloneRequest(req *model.Request) *model.Request {
	if req == nil {
		return nil
	}
	c := *req
	c.Messages = model.CloneMessages(req.Messages)
	if req.Tools != nil {
		c.Tools = make([]model.ToolDefinition, len(req.Tools))
		for i, t := range req.Tools {
			t.Parameters = cloneRaw(t.Parameters)
			c.Tools[i] = t
		}
	}
	if req.Output != nil {
		o := *req.Output
		o.Schema = cloneRaw(o.Schema)
		c.Output = &o
	}
	if req.Temperature != nil {
		t := *req.Temperature
		c.Temperature = &t
	}
	if req.ParallelToolCalls != nil {
		p := *req.ParallelToolCalls
		c.ParallelToolCalls = &p
	}
	return &c
}

// cloneResponse returns a deep copy of resp, so that a scripted response
// handed out twice, or changed by its receiver, stays as scripted.
func cloneResponse(resp *model.Response) *model.Response {
	if resp == nil {
		return nil
	}
	c := *resp
	c.Message = resp.Message.Clone()
	return &c
}

func cloneRaw(r json.RawMessage) json.RawMessage {
	if r == nil {
		return nil
	}
	return bytes.Clone(r)
}
