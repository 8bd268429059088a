package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/store"
	storemem "github.com/calf-go/calf/store/memory"
	"github.com/calf-go/calf/store/sqlite"
	"github.com/calf-go/calf/tool"
)

// skeletonPrefix names the measurements of the skeleton of a Calf run:
// "skeleton/memory", "skeleton/sqlite".
const skeletonPrefix = "skeleton/"

// The channels of the skeleton's events, one per event of a W1 run.
const (
	skelInput      = "skel.input"
	skelInference  = "skel.inference"
	skelToolCall   = "skel.tool_call"
	skelToolResult = "skel.tool_result"
	skelOutput     = "skel.output"
)

// skeletonStack does what a W1 run of Calf's agent does on the broker and
// the store, and nothing else: the same six events through a calf.Client
// on the in-process broker (input, inference, tool call, tool result,
// inference, output), each handled on the broker's workers and emitting
// the next, the same four writes of the run's record (the third, by the
// tool's handler, records the tool's result with the step's advance, as
// Calf does on the in-process broker), and W1's two model calls through
// model/openai. The
// records it writes are the JSON of W1's run states, encoded once at
// start: no state is encoded or decoded per run, and no agent logic runs
// (no request building, argument validation, hooks, usage or cost). Its
// CPU over the adapter's is what the event model and the store cost a
// run at the least, whatever the agent's own code does.
type skeletonStack struct {
	broker *memory.Broker
	client *calf.Client
	store  store.Store
	m      model.Model
	tools  []model.ToolDefinition
	states [4][]byte // the run's record after each of its four writes

	runs sync.Map // run id → *skeletonRun
}

// skeletonRun is what the skeleton's handlers share of one run.
type skeletonRun struct {
	req     *model.Request
	step    int // of the model call in progress
	version int64
	call    model.ToolCall
	done    chan error
}

// newSkeletonStack serves the skeleton on a fresh in-process broker and
// the store named kind (a SQLite file goes in dir).
func newSkeletonStack(ctx context.Context, kind, dir string, httpClient *http.Client, base string) (*skeletonStack, error) {
	st, err := openStore(kind, dir)
	if err != nil {
		return nil, err
	}
	m, add, err := w1ModelAndTool(httpClient, base)
	if err != nil {
		_ = closeStore(st)
		return nil, err
	}
	b := memory.New(nil)
	s := &skeletonStack{broker: b, client: calf.NewClient(b, nil), store: st, m: m, tools: []model.ToolDefinition{add.Definition()}}
	if s.states, err = w1States(); err != nil {
		_ = s.close()
		return nil, err
	}
	handlers := []struct {
		channel string
		h       calf.Handler
	}{
		{skelInput, s.onInput},
		{skelInference, s.onInference},
		{skelToolCall, s.onToolCall},
		{skelToolResult, s.onToolResult},
		{skelOutput, s.onOutput},
	}
	for _, h := range handlers {
		if err := s.client.Handle(ctx, h.channel, h.h, &calf.SubscribeOptions{Group: h.channel}); err != nil {
			_ = s.close()
			return nil, err
		}
	}
	return s, nil
}

// openStore opens a fresh store of kind, a SQLite file in dir.
func openStore(kind, dir string) (store.Store, error) {
	switch kind {
	case storeMemory:
		return storemem.New(), nil
	case storeSQLite:
		f, err := os.CreateTemp(dir, "w1-*.db")
		if err != nil {
			return nil, err
		}
		_ = f.Close()
		return sqlite.Open(f.Name(), nil)
	}
	return nil, fmt.Errorf("%w: unknown store %q: want %s or %s", errUsage, kind, storeMemory, storeSQLite)
}

// w1Record is the part of an agent run's record that a W1 run fills, with
// the record's JSON names: the skeleton writes what Calf writes (the
// record's type is the agent package's own). Its test decodes what it
// writes with agent.DecodeRunInfo.
type w1Record struct {
	RunID      string                 `json:"run_id"`
	Agent      string                 `json:"agent"`
	Status     agent.RunStatus        `json:"status"`
	Phase      string                 `json:"phase,omitempty"`
	Step       int                    `json:"step"`
	Messages   []model.Message        `json:"messages"`
	Pending    []w1Pending            `json:"pending,omitempty"`
	AdvancedBy string                 `json:"advanced_by,omitempty"`
	ToolCalls  []agent.ToolCallRecord `json:"tool_calls,omitempty"`
	Usage      model.Usage            `json:"usage"`
	Output     json.RawMessage        `json:"output,omitempty"`
	Cost       model.Cost             `json:"cost"`
	StartedAt  time.Time              `json:"started_at"`
	EndedAt    time.Time              `json:"ended_at,omitzero"`
}

// w1Pending is a pending tool call of a run's record.
type w1Pending struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// w1States returns the JSON of a W1 run's state after each of the four
// writes of its record: created, the first answer recorded, the tool's
// result recorded with the advance to step 2, and complete.
func w1States() ([4][]byte, error) {
	call := model.ToolCall{ID: toolCallID, Name: toolName, Arguments: toolArgs}
	result := model.Message{Role: model.RoleTool, ToolCallID: toolCallID, ToolName: toolName, Parts: []model.Part{model.TextPart("5")}}
	start := time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC)
	st := w1Record{
		RunID: calf.NewID(), Agent: agentName, Status: agent.RunRunning, Phase: "inference", Step: 1,
		Messages: []model.Message{model.UserMessage(prompt)}, StartedAt: start,
	}
	var out [4][]byte
	add := func(i int) error {
		data, err := json.Marshal(st)
		out[i] = data
		return err
	}
	if err := add(0); err != nil {
		return out, err
	}
	st.Messages = append(st.Messages, model.Message{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{call}})
	st.Phase, st.Pending = "tools", []w1Pending{{ID: call.ID, Name: call.Name, Arguments: call.Arguments}}
	st.Usage = model.Usage{InputTokens: 40, OutputTokens: 10}
	if err := add(1); err != nil {
		return out, err
	}
	st.Messages = append(st.Messages, result)
	st.Pending, st.Step, st.Phase, st.AdvancedBy = nil, 2, "inference", call.ID
	st.ToolCalls = []agent.ToolCallRecord{{Step: 1, ID: call.ID, Name: call.Name, Arguments: call.Arguments, Status: agent.StatusSuccess,
		Result: &tool.Result{Parts: result.Parts, Structured: json.RawMessage("5")}}}
	if err := add(2); err != nil {
		return out, err
	}
	st.Messages = append(st.Messages, model.Message{Role: model.RoleAssistant, Parts: []model.Part{model.TextPart(wantOutput)}})
	st.Status, st.Output, st.EndedAt = agent.RunComplete, json.RawMessage(strconv.Quote(wantOutput)), start.Add(time.Second)
	st.Usage = model.Usage{InputTokens: 90, OutputTokens: 16}
	return out, add(3)
}

// run does one run: it emits the input and waits for the output's check.
func (s *skeletonStack) run(ctx context.Context) error {
	id := calf.NewID()
	r := &skeletonRun{done: make(chan error, 1), req: &model.Request{
		Tools:    s.tools,
		Messages: []model.Message{model.SystemMessage(instructions), model.UserMessage(prompt)},
	}}
	s.runs.Store(id, r)
	defer s.runs.Delete(id)
	if _, err := s.client.Emit(ctx, skelInput, json.RawMessage(strconv.Quote(prompt)), calf.WithKey(id)); err != nil {
		return err
	}
	select {
	case err := <-r.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// of returns the run a message is about, by its key.
func (s *skeletonStack) of(msg *calf.Message) (string, *skeletonRun, error) {
	r, ok := s.runs.Load(msg.Key)
	if !ok {
		return "", nil, calf.Permanent(fmt.Errorf("skeleton: no run %q", msg.Key))
	}
	return msg.Key, r.(*skeletonRun), nil
}

// end ends the run with err, nil for a run whose output checked out.
func (r *skeletonRun) end(err error) error {
	r.done <- err
	return nil
}

// write writes the run's record, its i-th state.
func (s *skeletonStack) write(ctx context.Context, id string, r *skeletonRun, i int) error {
	v, err := s.store.Put(ctx, store.KindRun, id, s.states[i], r.version)
	if err != nil {
		return err
	}
	r.version = v
	return nil
}

func (s *skeletonStack) onInput(ctx context.Context, msg *calf.Message) error {
	id, r, err := s.of(msg)
	if err != nil {
		return err
	}
	if err := s.write(ctx, id, r, 0); err != nil {
		return err
	}
	_, err = s.client.Emit(ctx, skelInference, json.RawMessage(`{"step":1}`), calf.WithKey(id))
	return err
}

func (s *skeletonStack) onInference(ctx context.Context, msg *calf.Message) error {
	id, r, err := s.of(msg)
	if err != nil {
		return err
	}
	resp, err := s.m.Generate(ctx, r.req)
	if err != nil {
		return r.end(err)
	}
	r.req.Messages = append(r.req.Messages, resp.Message)
	r.step++
	if r.step == 1 { // the first answer: W1's tool call
		if len(resp.Message.ToolCalls) != 1 || resp.Message.ToolCalls[0].Name != toolName {
			return r.end(fmt.Errorf("%w: the first answer is not one call of %s", errWrongOutput, toolName))
		}
		r.call = resp.Message.ToolCalls[0]
		if err := s.write(ctx, id, r, 1); err != nil {
			return err
		}
		_, err = s.client.Emit(ctx, skelToolCall, json.RawMessage(r.call.Arguments), calf.WithKey(id))
		return err
	}
	if err := s.write(ctx, id, r, 3); err != nil {
		return err
	}
	_, err = s.client.Emit(ctx, skelOutput, json.RawMessage(strconv.Quote(resp.Message.Text())), calf.WithKey(id))
	return err
}

func (s *skeletonStack) onToolCall(ctx context.Context, msg *calf.Message) error {
	id, r, err := s.of(msg)
	if err != nil {
		return err
	}
	var in operands
	if err := msg.Decode(&in); err != nil {
		return r.end(fmt.Errorf("%w: tool arguments: %v", errWrongOutput, err))
	}
	sum := []byte(strconv.Itoa(in.A + in.B))
	if err := s.write(ctx, id, r, 2); err != nil {
		return err
	}
	_, err = s.client.Emit(ctx, skelToolResult, json.RawMessage(sum), calf.WithKey(id))
	return err
}

func (s *skeletonStack) onToolResult(ctx context.Context, msg *calf.Message) error {
	id, r, err := s.of(msg)
	if err != nil {
		return err
	}
	r.req.Messages = append(r.req.Messages, model.Message{
		Role: model.RoleTool, ToolCallID: r.call.ID, ToolName: r.call.Name,
		Parts: []model.Part{model.TextPart(string(msg.Data))},
	})
	_, err = s.client.Emit(ctx, skelInference, json.RawMessage(`{"step":2}`), calf.WithKey(id))
	return err
}

func (s *skeletonStack) onOutput(_ context.Context, msg *calf.Message) error {
	_, r, err := s.of(msg)
	if err != nil {
		return err
	}
	var text string
	if err := msg.Decode(&text); err != nil {
		return r.end(err)
	}
	return r.end(checkOutput(text))
}

func (s *skeletonStack) close() error {
	err := s.client.Close()
	if berr := s.broker.Close(); err == nil {
		err = berr
	}
	if serr := closeStore(s.store); err == nil {
		err = serr
	}
	return err
}
