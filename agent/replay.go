package agent

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/calf-go/calf/model"
)

// ErrRecordingEnded is returned by a [Recording] asked for more model calls
// than the run it recorded made: the replay went another way.
var ErrRecordingEnded = errors.New("agent: the recording has no more model responses")

// Recording is a model that answers with the responses a run recorded, one
// model call after another, so that the run can be replayed without a
// model: to debug a tool, a hook or a permission against what the model
// really said, or to reproduce a failure. It serves one replay: each call
// takes the next response, whatever the request.
type Recording struct {
	run       string
	prompt    string
	responses []model.Message

	mu   sync.Mutex
	next int
}

// Recording returns the recording of the run runID, read from the store:
// its prompt, and the model's responses in the order the run received
// them (the assistant messages of the run, without the session history it
// continued).
func (rt *Runtime) Recording(ctx context.Context, runID string) (*Recording, error) {
	st, err := rt.LoadAgentRun(ctx, runID)
	if err != nil {
		return nil, err
	}
	r := &Recording{run: runID}
	for _, m := range st.NewMessages() {
		switch {
		case m.Role == model.RoleUser && r.prompt == "" && len(r.responses) == 0:
			r.prompt = m.Text()
		case m.Role == model.RoleAssistant:
			r.responses = append(r.responses, m)
		}
	}
	if len(r.responses) == 0 {
		return nil, fmt.Errorf("agent: run %s recorded no model response", runID)
	}
	return r, nil
}

// Name returns "recording:" and the recorded run's id.
func (r *Recording) Name() string { return "recording:" + r.run }

// Prompt returns the prompt the recorded run started with.
func (r *Recording) Prompt() string { return r.prompt }

// Used returns how many of the recorded model responses the replay has
// taken, and how many were recorded.
func (r *Recording) Used() (used, recorded int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.next, len(r.responses)
}

// Generate answers with the next recorded response, or an error matching
// [ErrRecordingEnded] when none is left.
func (r *Recording) Generate(ctx context.Context, _ *model.Request) (*model.Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.next >= len(r.responses) {
		return nil, fmt.Errorf("%w: run %s made %d model calls, and the replay asks for one more", ErrRecordingEnded, r.run, len(r.responses))
	}
	m := r.responses[r.next]
	r.next++
	resp := &model.Response{Message: cloneMessage(m), FinishReason: model.FinishStop, Model: r.Name()}
	if len(m.ToolCalls) > 0 {
		resp.FinishReason = model.FinishToolCalls
	}
	return resp, nil
}

// cloneMessage copies m's slices, so that a run cannot change the recording.
func cloneMessage(m model.Message) model.Message {
	m.Parts = append([]model.Part(nil), m.Parts...)
	m.ToolCalls = append([]model.ToolCall(nil), m.ToolCalls...)
	return m
}
