package transport

import (
	"encoding/json"
	"strconv"

	"github.com/calf-go/calf/model"
)

// DecodeError reads the error object that OpenAI, Anthropic and Gemini
// send, {"error": {...}}, into e: its type (Anthropic's and OpenAI's
// "type", Gemini's "status"), its code and its message. Some compatible
// servers send {"error": "text"} or {"message": "text"}; those give the
// message. It reports false when body is none of these.
func DecodeError(body []byte, e *model.StatusError) bool {
	var v struct {
		Type  string          `json:"type"`
		Error json.RawMessage `json:"error"`
		// Message is the top-level message some servers send.
		Message string `json:"message"`
	}
	if json.Unmarshal(body, &v) != nil {
		// Gemini sends a list of one error object from some endpoints.
		var list []json.RawMessage
		if json.Unmarshal(body, &list) == nil && len(list) == 1 {
			return DecodeError(list[0], e)
		}
		return false
	}
	if len(v.Error) > 0 {
		var s string
		if json.Unmarshal(v.Error, &s) == nil {
			e.Message = s
			return s != ""
		}
		var obj struct {
			Type    string          `json:"type"`
			Status  string          `json:"status"`
			Code    json.RawMessage `json:"code"`
			Message string          `json:"message"`
		}
		if json.Unmarshal(v.Error, &obj) != nil {
			return false
		}
		e.Type = obj.Type
		if e.Type == "" {
			e.Type = obj.Status
		}
		e.Code = codeString(obj.Code)
		e.Message = obj.Message
		return true
	}
	if v.Message != "" {
		e.Message = v.Message
		return true
	}
	return false
}

// codeString returns an error code sent as a string or a number.
func codeString(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		if _, err := strconv.Atoi(n.String()); err == nil {
			return n.String()
		}
	}
	return ""
}
