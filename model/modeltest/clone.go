package modeltest

import (
	"bytes"
	"encoding/json"
	"slices"

	"github.com/calf-go/calf/model"
)

// cloneRequest returns a deep copy of req, so that a recorded request is
// not changed by a caller that reuses its slices.
func cloneRequest(req *model.Request) *model.Request {
	if req == nil {
		return nil
	}
	c := *req
	c.Messages = cloneMessages(req.Messages)
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
	c.Message = cloneMessage(resp.Message)
	return &c
}

func cloneMessages(ms []model.Message) []model.Message {
	if ms == nil {
		return nil
	}
	c := make([]model.Message, len(ms))
	for i, m := range ms {
		c[i] = cloneMessage(m)
	}
	return c
}

func cloneMessage(m model.Message) model.Message {
	if m.Parts != nil {
		parts := make([]model.Part, len(m.Parts))
		for i, p := range m.Parts {
			p.Data = bytes.Clone(p.Data)
			parts[i] = p
		}
		m.Parts = parts
	}
	m.ToolCalls = slices.Clone(m.ToolCalls)
	return m
}

func cloneRaw(r json.RawMessage) json.RawMessage {
	if r == nil {
		return nil
	}
	return bytes.Clone(r)
}
