package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"unicode/utf8"
)

// newHTTPClient returns a client whose transport keeps enough idle
// connections for conc concurrent runs. The floor and the Calf adapter each
// get their own, configured alike.
func newHTTPClient(conc int) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = max(256, 2*conc)
	t.MaxIdleConns = 2 * t.MaxIdleConnsPerHost
	return &http.Client{Transport: t}
}

// floor does W1 with nothing but net/http and encoding/json: the least a
// program that makes the same model calls must spend.
type floor struct {
	client *http.Client
	url    string // the chat completions endpoint
}

func newFloor(client *http.Client, base string) *floor {
	return &floor{client: client, url: base + "/chat/completions"}
}

// completion is the part of a chat completion the floor reads.
type completion struct {
	Choices []struct {
		Message struct {
			Content   string `json:"content"`
			ToolCalls []struct {
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"message"`
	} `json:"choices"`
}

// The parts of W1's request bodies that do not change, in the order and
// shape the openai adapter writes them.
const (
	bodyStart = `{"model":"` + modelName + `","messages":[{"role":"system","content":` // then the instructions
	bodyUser  = `},{"role":"user","content":`
	bodyTools = `],"tools":[{"type":"function","function":{"name":"` + toolName + `","description":"` + toolDesc +
		`","parameters":{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"required":["a","b"],"additionalProperties":false}}}]}`
)

// run does one W1 run: ask, call the tool, ask again, check the answer.
func (f *floor) run(ctx context.Context) error {
	body := make([]byte, 0, 640)
	body = append(body, bodyStart...)
	body = appendJSONString(body, instructions)
	body = append(body, bodyUser...)
	body = appendJSONString(body, prompt)
	body = append(body, '}')
	var first completion
	if err := f.post(ctx, append(body[:len(body):len(body)], bodyTools...), &first); err != nil {
		return err
	}
	if len(first.Choices) == 0 || len(first.Choices[0].Message.ToolCalls) != 1 {
		return fmt.Errorf("%w: the first answer is not one tool call", errWrongOutput)
	}
	call := first.Choices[0].Message.ToolCalls[0]
	if call.Function.Name != toolName {
		return fmt.Errorf("%w: the model called %q", errWrongOutput, call.Function.Name)
	}
	var in operands
	if err := json.Unmarshal([]byte(call.Function.Arguments), &in); err != nil {
		return fmt.Errorf("%w: tool arguments: %v", errWrongOutput, err)
	}
	result := strconv.Itoa(in.A + in.B)

	body = append(body, `,{"role":"assistant","tool_calls":[{"id":`...)
	body = appendJSONString(body, call.ID)
	body = append(body, `,"type":"function","function":{"name":`...)
	body = appendJSONString(body, call.Function.Name)
	body = append(body, `,"arguments":`...)
	body = appendJSONString(body, call.Function.Arguments)
	body = append(body, `}}]},{"role":"tool","content":`...)
	body = appendJSONString(body, result)
	body = append(body, `,"tool_call_id":`...)
	body = appendJSONString(body, call.ID)
	body = append(body, '}')
	body = append(body, bodyTools...)
	var second completion
	if err := f.post(ctx, body, &second); err != nil {
		return err
	}
	if len(second.Choices) == 0 {
		return fmt.Errorf("%w: the second answer has no choices", errWrongOutput)
	}
	return checkOutput(second.Choices[0].Message.Content)
}

// post sends one chat completion request and decodes the answer into v.
func (f *floor) post(ctx context.Context, body []byte, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Authorization", "Bearer "+apiKey)
	resp, err := f.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("chat completion: HTTP %d: %s", resp.StatusCode, data)
	}
	return json.Unmarshal(data, v)
}

// appendJSONString appends s as a JSON string.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		case c < utf8.RuneSelf:
			b = append(b, c)
		default:
			r, n := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && n == 1 {
				b = append(b, `\ufffd`...)
			} else {
				b = append(b, s[i:i+n]...)
			}
			i += n
			continue
		}
		i++
	}
	return append(b, '"')
}
