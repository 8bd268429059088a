package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/internal/httperr"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/runner"
	"github.com/calf-go/calf/store"
)

// errBadRequest marks the errors of a request the client must change.
var errBadRequest = httperr.ErrBadRequest

// errorBody and errorObject are the error answers of every endpoint, also
// sent as events of a stream.
type (
	errorBody   = httperr.Body
	errorObject = httperr.Object
)

// writeJSON writes v as a 200 JSON response.
func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_ = json.NewEncoder(w).Encode(v)
}

// requestError reports err, from reading a request or starting its run,
// by the one table of error answers ([httperr.Of]): among others 404 for
// what does not exist, 409 for a conflict or a parked run, 503 with
// Retry-After for an outage, 500 (logged) for a failure of the server.
func (s *Server) requestError(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil {
		return // the client went away: there is nobody to answer
	}
	a := httperr.Write(w, err)
	switch {
	case a.Unexpected:
		s.log.Error("server: request failed", "err", err)
	case a.Status == http.StatusServiceUnavailable:
		s.outageLog.Do(func(skipped int64) {
			s.log.Warn("server: answered 503: a service is unavailable", "err", err, "skipped", skipped)
		})
	}
}

// decodeBody decodes the JSON object of r's body into v.
func decodeBody(r *http.Request, v any) error {
	data, err := io.ReadAll(r.Body)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: the body is not a valid JSON request: %v", errBadRequest, err)
	}
	if dec.More() {
		return fmt.Errorf("%w: the body has data after its JSON object", errBadRequest)
	}
	return nil
}

// modelObject is one entry of GET /v1/models.
type modelObject struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

func (s *Server) models(w http.ResponseWriter, _ *http.Request) {
	list := struct {
		Object string        `json:"object"`
		Data   []modelObject `json:"data"`
	}{Object: "list", Data: []modelObject{}}
	for _, name := range s.names {
		list.Data = append(list.Data, modelObject{ID: name, Object: "model", Created: s.started.Unix(), OwnedBy: "calf"})
	}
	writeJSON(w, list)
}

// runner returns the runner a request names as its model.
func (s *Server) runner(w http.ResponseWriter, name string) (runner.Runner, bool) {
	if name == "" {
		httperr.Write(w, &httperr.Error{Kind: errBadRequest, Code: "missing_model", Message: "the request names no model: give an agent's name (GET /v1/models lists them)"})
		return nil, false
	}
	r, ok := s.runners[name]
	if !ok {
		httperr.Write(w, &httperr.Error{Kind: store.ErrNotFound, Code: "model_not_found", Message: fmt.Sprintf("the model %q does not exist: GET /v1/models lists the agents served", name)})
		return nil, false
	}
	return r, true
}

// content is a message's content in either API: a string, or an array of
// parts of which the text ones are read.
type content struct {
	text string
}

// MarshalJSON writes the content's text, as a string.
func (c content) MarshalJSON() ([]byte, error) { return json.Marshal(c.text) }

func (c *content) UnmarshalJSON(data []byte) error {
	var str string
	if err := json.Unmarshal(data, &str); err == nil {
		c.text = str
		return nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(data, &parts); err != nil {
		return fmt.Errorf("a message's content is a string or an array of parts")
	}
	var b strings.Builder
	for _, p := range parts {
		switch p.Type {
		case "text", "input_text", "output_text":
			b.WriteString(p.Text)
		default:
			return fmt.Errorf("content parts of type %q are not supported (text only)", p.Type)
		}
	}
	c.text = b.String()
	return nil
}

// inMessage is a message a client sends.
type inMessage struct {
	Type       string          `json:"type"`
	Role       string          `json:"role"`
	Content    content         `json:"content"`
	ToolCalls  json.RawMessage `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
}

// splitThread turns a client's messages into the prompt (the last
// message, which must be the user's) and the thread before it.
func splitThread(msgs []inMessage) (prompt string, thread []model.Message, err error) {
	if len(msgs) == 0 {
		return "", nil, fmt.Errorf("%w: no messages", errBadRequest)
	}
	for i, m := range msgs {
		if m.Type != "" && m.Type != "message" {
			return "", nil, fmt.Errorf("%w: input items of type %q are not supported (messages only)", errBadRequest, m.Type)
		}
		if len(m.ToolCalls) > 0 && string(m.ToolCalls) != "null" || m.ToolCallID != "" {
			return "", nil, fmt.Errorf("%w: messages %d: tool calls are the agent's own; a client cannot send them", errBadRequest, i)
		}
		var role model.Role
		switch m.Role {
		case "system", "developer":
			role = model.RoleSystem
		case "user":
			role = model.RoleUser
		case "assistant":
			role = model.RoleAssistant
		default:
			return "", nil, fmt.Errorf("%w: messages %d: role %q is not supported (system, developer, user, assistant)", errBadRequest, i, m.Role)
		}
		if i == len(msgs)-1 {
			if role != model.RoleUser {
				return "", nil, fmt.Errorf("%w: the last message must be the user's", errBadRequest)
			}
			return m.Content.text, thread, nil
		}
		thread = append(thread, model.Message{Role: role, Parts: []model.Part{model.TextPart(m.Content.text)}})
	}
	panic("unreachable")
}

// errClientTools refuses the tools a client sends.
var errClientTools = fmt.Errorf("%w: tools are the agent's own: a request cannot add any", errBadRequest)

// IdempotencyHeader, in a request to the OpenAI-compatible API (chat
// completions, responses), is the client's idempotency key: the same
// request under the same key, within the runtime's idempotency window
// (24 hours by default), is answered by the run the first one started,
// not a second run; another request under a key in use is refused with
// 409 (code idempotency_conflict). Keys are the user's own.
const IdempotencyHeader = "Idempotency-Key"

// begin returns the prompt of a request's messages and the options to run
// it with: in a session named by SessionHeader, or stateless with the
// thread the client sent; or refused, when not nil, or why the request is
// not valid. The run is the requesting user's; model is the one the
// request names, part of what an idempotency key stands for.
func (s *Server) begin(r *http.Request, model string, msgs []inMessage, refused error) (string, *runner.Options, error) {
	if refused != nil {
		return "", nil, refused
	}
	prompt, thread, err := splitThread(msgs)
	if err != nil {
		return "", nil, err
	}
	o := s.runOptions(userOf(r), runner.Options{RunID: calf.NewID(), Thread: thread})
	if id := r.Header.Get(SessionHeader); id != "" {
		if err := s.claimSession(r.Context(), userOf(r), id); err != nil {
			return "", nil, err
		}
		// The session holds the conversation: the messages before the
		// last one are what the client remembers of it.
		o.SessionID, o.Thread = id, nil
	}
	if key := r.Header.Get(IdempotencyHeader); key != "" {
		// The same request under the key is the same run: started once,
		// its answer given again.
		req := struct {
			Path     string      `json:"path"`
			Model    string      `json:"model,omitempty"`
			Messages []inMessage `json:"messages"`
			Session  string      `json:"session,omitempty"`
		}{r.URL.Path, model, msgs, o.SessionID}
		run, err := s.rt.RunForKey(r.Context(), "http/"+userOf(r), key, req, o.RunID)
		if err != nil {
			return "", nil, err
		}
		o.RunID = run
	}
	if err := s.ownRun(r.Context(), userOf(r), o.RunID); err != nil {
		return "", nil, err
	}
	return prompt, o, nil
}

// stream runs rn and tells its text as it comes: delta for each piece,
// sep between the texts of successive model calls. At the end it makes
// sure the client has the whole final text: a run whose model did not
// stream, or whose last step's text is not the output (a structured
// output), tells the output as the last piece.
type textStream struct {
	sent     strings.Builder // all the text told
	step     strings.Builder // the text of the current model call
	stepText bool
}

// progress handles one progress report, calling tell for text to send.
func (t *textStream) progress(p runner.Progress, tell func(string)) {
	if p.Event != nil && p.Event.Kind == agent.EventInference {
		t.step.Reset()
		t.stepText = false
		return
	}
	if p.Delta == "" {
		return
	}
	piece := p.Delta
	if !t.stepText && t.sent.Len() > 0 {
		piece = "\n\n" + piece
	}
	t.stepText = true
	t.step.WriteString(p.Delta)
	t.sent.WriteString(piece)
	tell(piece)
}

// finish tells what the client lacks of final, and returns the whole text
// told.
func (t *textStream) finish(final string, tell func(string)) string {
	if t.stepText && t.step.String() == final {
		return t.sent.String()
	}
	piece := final
	if t.sent.Len() > 0 && final != "" {
		piece = "\n\n" + final
	}
	if piece != "" {
		t.sent.WriteString(piece)
		tell(piece)
	}
	return t.sent.String()
}

// sse writes server-sent events.
type sse struct {
	w http.ResponseWriter
	f *http.ResponseController
	// A resumable stream (run set) numbers its events "{run}/{n}", n
	// from 0, and writes none up to skip, which a resumed stream's client
	// has had: the events of a stream are the same each time it is
	// produced from the run's log.
	run  string
	n    int64
	skip int64

	mu sync.Mutex // a write, and the keep-alive comments written meanwhile
}

func newSSE(w http.ResponseWriter) *sse {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	return &sse{w: w, f: http.NewResponseController(w), skip: -1}
}

// event writes one event: its name (none when empty) and v as its data.
func (e *sse) event(name string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return e.raw(name, data)
}

// eventWithID writes one event with an id, for a client to resume after.
func (e *sse) eventWithID(id, name string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return e.write(id, name, data)
}

// comment writes a comment line, which clients ignore.
func (e *sse) comment(text string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, err := e.w.Write([]byte(": " + text + "\n\n")); err != nil {
		return err
	}
	return e.f.Flush()
}

func (e *sse) raw(name string, data []byte) error {
	if e.run == "" {
		return e.write("", name, data)
	}
	n := e.n
	e.n++
	if n <= e.skip {
		return nil // the client has it
	}
	return e.write(e.run+"/"+strconv.FormatInt(n, 10), name, data)
}

func (e *sse) write(id, name string, data []byte) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	var b bytes.Buffer
	if id != "" {
		b.WriteString("id: " + id + "\n")
	}
	if name != "" {
		b.WriteString("event: " + name + "\n")
	}
	b.WriteString("data: ")
	b.Write(data)
	b.WriteString("\n\n")
	if _, err := e.w.Write(b.Bytes()); err != nil {
		return err
	}
	return e.f.Flush()
}
