package a2a

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	spec "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/internal/httperr"
	"github.com/calf-go/calf/internal/httpheader"
	"github.com/calf-go/calf/internal/sweep"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/runner"
	"github.com/calf-go/calf/store"
)

// ServerOptions configure a [Server].
type ServerOptions struct {
	// URL is where clients reach the server, as the agent card says: both
	// bindings are at URL (JSON-RPC posts to it; REST's routes are paths
	// under it).
	URL string
	// Version is the agent's version on its card. Default: "1".
	Version string
	// Skills describe what the agent can do, on its card. Default: one
	// skill from the runner's name and description, and one per tool of
	// an agent.
	Skills []spec.AgentSkill
	// Token, when set, is the bearer token every request but the agent
	// card's must carry. Set it for a server that listens beyond
	// loopback.
	Token string
	// Logger receives the server's diagnostics. Default: none.
	Logger *slog.Logger
}

// Server offers a Calf agent, team or workflow as an A2A 1.0 agent, over
// JSON-RPC and REST, with the official Go SDK. An A2A task is a Calf run
// (its run id is the task id; the task's context is the run's session):
// the task is kept in the state store, and its status is read from the
// run's, so a task outlives the process that received it and is answered
// by a server started again.
type Server struct {
	r    runner.Runner
	rt   *agent.Runtime
	opts ServerOptions
	log  *slog.Logger
	h    http.Handler

	mu sync.Mutex
	// live counts the executions of each task in this process, from
	// Execute to their cleanup, when their last events are stored: a task
	// live here is not brought up to date from its run, which its
	// execution is doing.
	live map[spec.TaskID]int
}

// executing records that an execution of task id starts (delta 1) or
// has ended (-1) in this process.
func (s *Server) executing(id spec.TaskID, delta int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := s.live[id] + delta; n > 0 {
		s.live[id] = n
	} else {
		delete(s.live, id)
	}
}

// isLive reports whether task id is being executed in this process.
func (s *Server) isLive(id spec.TaskID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.live[id] > 0
}

// NewServer returns a server for r, whose runs go through rt.
func NewServer(rt *agent.Runtime, r runner.Runner, opts *ServerOptions) *Server {
	var o ServerOptions
	if opts != nil {
		o = *opts
	}
	if o.Version == "" {
		o.Version = "1"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{r: r, rt: rt, opts: o, log: o.Logger, live: map[spec.TaskID]int{}}
	rt.AddSweeper("a2a", sweepTasks)
	// A message's id is its idempotency key (keyedHandler).
	var handler a2asrv.RequestHandler = &keyedHandler{s: s, RequestHandler: a2asrv.NewHandler(&executor{s: s},
		a2asrv.WithTaskStore(&taskStore{s: s}),
		a2asrv.WithLogger(o.Logger),
	)}
	mux := http.NewServeMux()
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(s.Card()))
	// Both bindings share the base URL: JSON-RPC posts to it, REST's
	// routes are paths under it (/message:send, /tasks/{id}, ...).
	mux.Handle("POST /{$}", a2asrv.NewJSONRPCHandler(handler))
	mux.Handle("/", a2asrv.NewRESTHandler(handler))
	s.h = mux
	return s
}

// Card returns the agent card the server publishes at
// /.well-known/agent-card.json.
func (s *Server) Card() *spec.AgentCard {
	base := strings.TrimSuffix(s.opts.URL, "/")
	skills := s.opts.Skills
	if skills == nil {
		skills = []spec.AgentSkill{{ID: s.r.Name(), Name: s.r.Name(), Description: s.r.Description(), Tags: []string{"calf"}}}
		if t, ok := s.r.(interface{ Tools() []model.ToolDefinition }); ok {
			for _, d := range t.Tools() {
				skills = append(skills, spec.AgentSkill{ID: d.Name, Name: d.Name, Description: d.Description, Tags: []string{"tool"}})
			}
		}
	}
	card := &spec.AgentCard{
		Name:        s.r.Name(),
		Description: s.r.Description(),
		Version:     s.opts.Version,
		SupportedInterfaces: []*spec.AgentInterface{
			spec.NewAgentInterface(base, spec.TransportProtocolJSONRPC),
			spec.NewAgentInterface(base, spec.TransportProtocolHTTPJSON),
		},
		Capabilities:       spec.AgentCapabilities{Streaming: true},
		DefaultInputModes:  []string{"text/plain"},
		DefaultOutputModes: []string{"text/plain", "application/json"},
		Skills:             skills,
	}
	if s.opts.Token != "" {
		card.SecuritySchemes = spec.NamedSecuritySchemes{"bearer": spec.HTTPAuthSecurityScheme{Scheme: "Bearer"}}
		card.SecurityRequirements = spec.SecurityRequirementsOptions{{"bearer": {}}}
	}
	return card
}

// ServeHTTP serves the agent card, JSON-RPC (POST /) and REST (its routes
// under /).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.opts.Token != "" && r.URL.Path != a2asrv.WellKnownAgentCardPath && !httpheader.Bearer(r, s.opts.Token) {
		httperr.Write(w, fmt.Errorf("%w: missing or wrong bearer token", httperr.ErrUnauthorized))
		return
	}
	if v := r.Header.Get(spec.SvcParamVersion); v != "" && v != "1" && !strings.HasPrefix(v, "1.") {
		refuseVersion(w, r, v)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	s.h.ServeHTTP(w, r)
}

// refuseVersion answers a request for a protocol version other than 1.x,
// in the binding the request used.
func refuseVersion(w http.ResponseWriter, r *http.Request, v string) {
	msg := fmt.Sprintf("A2A version %q is not supported: this server speaks 1.0", v)
	w.Header().Set("Content-Type", "application/json")
	if r.URL.Path != "/" {
		// REST's error body is A2A's (google.rpc.Status); its status, the
		// table's for a request the client must change.
		status := httperr.Of(fmt.Errorf("%w: %s", httperr.ErrBadRequest, msg)).Status
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": status, "status": "FAILED_PRECONDITION", "message": msg}})
		return
	}
	var req struct {
		ID json.RawMessage `json:"id"`
	}
	_ = json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody)).Decode(&req)
	if len(req.ID) == 0 {
		req.ID = json.RawMessage("null")
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID, "error": map[string]any{"code": -32009, "message": msg}})
}

// maxBody bounds a request's body.
const maxBody = 4 << 20

// executor carries out A2A tasks as Calf runs.
type executor struct{ s *Server }

// messageText is the text of a message's text parts, or an error for a
// message with none.
func messageText(m *spec.Message) (string, error) {
	if m == nil {
		return "", errors.New("no message")
	}
	var b strings.Builder
	for _, p := range m.Parts {
		if t := p.Text(); t != "" {
			if b.Len() > 0 {
				b.WriteString("\n")
			}
			b.WriteString(t)
		} else if d := p.Data(); d != nil {
			raw, _ := json.Marshal(d)
			if b.Len() > 0 {
				b.WriteString("\n")
			}
			b.Write(raw)
		}
	}
	if b.Len() == 0 {
		return "", errors.New("the message has no text or data part")
	}
	return b.String(), nil
}

func statusMessage(info spec.TaskInfoProvider, text string) *spec.Message {
	return spec.NewMessageForTask(spec.MessageRoleAgent, info, spec.NewTextPart(text))
}

// resultEvents returns the events that end a task with res.
func resultEvents(info spec.TaskInfoProvider, res *runner.Result) []spec.Event {
	switch res.Status {
	case runner.Complete:
		part := spec.NewTextPart(res.Text)
		if len(res.Structured) > 0 {
			var v any
			if json.Unmarshal(res.Structured, &v) == nil {
				part = spec.NewDataPart(v)
			}
		}
		return []spec.Event{spec.NewArtifactEvent(info, part), spec.NewStatusUpdateEvent(info, spec.TaskStateCompleted, nil)}
	case runner.Cancelled:
		return []spec.Event{spec.NewStatusUpdateEvent(info, spec.TaskStateCanceled, statusMessage(info, res.Error))}
	case runner.Failed:
		return []spec.Event{spec.NewStatusUpdateEvent(info, spec.TaskStateFailed, statusMessage(info, res.Error))}
	}
	return []spec.Event{spec.NewStatusUpdateEvent(info, spec.TaskStateInputRequired,
		statusMessage(info, fmt.Sprintf("run %s waits: paused, interrupted, or for an approval", res.RunID)))}
}

// Cleanup ends the execution that Execute started, once the SDK has
// processed its events.
func (e *executor) Cleanup(_ context.Context, ec *a2asrv.ExecutorContext, _ spec.SendMessageResult, _ error) {
	if ec.Message != nil { // not a cancellation's
		e.s.executing(ec.TaskID, -1)
	}
}

var _ a2asrv.AgentExecutionCleaner = (*executor)(nil)

func (e *executor) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[spec.Event, error] {
	e.s.executing(ec.TaskID, 1)
	return func(yield func(spec.Event, error) bool) {
		prompt, err := messageText(ec.Message)
		if err != nil {
			yield(nil, fmt.Errorf("%w: %v", spec.ErrInvalidParams, err))
			return
		}
		if ec.StoredTask == nil {
			if !yield(spec.NewSubmittedTask(ec, ec.Message), nil) {
				return
			}
		}
		if !yield(spec.NewStatusUpdateEvent(ec, spec.TaskStateWorking, nil), nil) {
			return
		}
		// The run belongs to the task, not to this request: a client that
		// goes away leaves it running (cancel the task to stop it), and
		// the task's status follows it in the store.
		rctx := context.WithoutCancel(ctx)
		listening := true
		res, err := e.s.r.Run(rctx, e.s.rt, prompt, &runner.Options{RunID: string(ec.TaskID), SessionID: ec.ContextID}, func(p runner.Progress) {
			if p.Message == "" || !listening {
				return
			}
			listening = yield(spec.NewStatusUpdateEvent(ec, spec.TaskStateWorking, statusMessage(ec, p.Message)), nil)
		})
		if !listening {
			return
		}
		if err != nil {
			yield(spec.NewStatusUpdateEvent(ec, spec.TaskStateFailed, statusMessage(ec, err.Error())), nil)
			return
		}
		for _, ev := range resultEvents(ec, res) {
			if !yield(ev, nil) {
				return
			}
		}
	}
}

func (e *executor) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[spec.Event, error] {
	return func(yield func(spec.Event, error) bool) {
		if ec.StoredTask == nil {
			yield(nil, spec.ErrTaskNotFound)
			return
		}
		// The cancellation's event first, while the task's execution is
		// still open to take it: cancelling the run first lets the
		// execution end on its own, closing the task's queue before the
		// SDK writes this event to it ("queue is closed").
		if !yield(spec.NewStatusUpdateEvent(ec, spec.TaskStateCanceled, nil), nil) {
			return
		}
		if err := e.s.r.Cancel(ctx, e.s.rt, string(ec.TaskID), "cancelled by the A2A client"); err != nil && !errors.Is(err, store.ErrNotFound) {
			yield(nil, err)
		}
	}
}

// KindTask is the store kind of A2A tasks; the id is the task id.
const KindTask = "a2a_task"

// storedTask is a task as the state store keeps it.
type storedTask struct {
	Task      *spec.Task `json:"task"`
	User      string     `json:"user,omitempty"`
	UpdatedAt time.Time  `json:"updated_at"`
}

// taskStore keeps A2A tasks in the runtime's state store, and reads the
// status of a task whose run may have moved on from its run.
type taskStore struct{ s *Server }

var _ taskstore.Store = (*taskStore)(nil)

func (ts *taskStore) st() store.Store { return ts.s.rt.Store() }

func (ts *taskStore) Create(ctx context.Context, task *spec.Task) (taskstore.TaskVersion, error) {
	data, err := json.Marshal(storedTask{Task: task, UpdatedAt: time.Now()})
	if err != nil {
		return taskstore.TaskVersionMissing, err
	}
	v, err := ts.st().Put(ctx, KindTask, string(task.ID), data, 0)
	if errors.Is(err, store.ErrConflict) {
		return taskstore.TaskVersionMissing, taskstore.ErrTaskAlreadyExists
	}
	return taskstore.TaskVersion(v), err
}

func (ts *taskStore) Update(ctx context.Context, req *taskstore.UpdateRequest) (taskstore.TaskVersion, error) {
	version := int64(req.PrevVersion)
	if req.PrevVersion == taskstore.TaskVersionMissing {
		rec, err := ts.st().Get(ctx, KindTask, string(req.Task.ID))
		if errors.Is(err, store.ErrNotFound) {
			return taskstore.TaskVersionMissing, spec.ErrTaskNotFound
		}
		if err != nil {
			return taskstore.TaskVersionMissing, err
		}
		version = rec.Version
	}
	data, err := json.Marshal(storedTask{Task: req.Task, UpdatedAt: time.Now()})
	if err != nil {
		return taskstore.TaskVersionMissing, err
	}
	v, err := ts.st().Put(ctx, KindTask, string(req.Task.ID), data, version)
	if errors.Is(err, store.ErrConflict) {
		return taskstore.TaskVersionMissing, taskstore.ErrConcurrentModification
	}
	return taskstore.TaskVersion(v), err
}

func (ts *taskStore) Get(ctx context.Context, id spec.TaskID) (*taskstore.StoredTask, error) {
	rec, err := ts.st().Get(ctx, KindTask, string(id))
	if errors.Is(err, store.ErrNotFound) {
		return nil, spec.ErrTaskNotFound
	}
	if err != nil {
		return nil, err
	}
	var st storedTask
	if err := json.Unmarshal(rec.Data, &st); err != nil || st.Task == nil {
		return nil, fmt.Errorf("a2a: task %s: corrupt record: %v", id, err)
	}
	task := st.Task
	version := taskstore.TaskVersion(rec.Version)
	if !task.Status.State.Terminal() && !ts.s.isLive(task.ID) {
		// The process that carried the task may have stopped: its run
		// says how it stands.
		if t, v, ok := ts.reconcile(ctx, task, version); ok {
			task, version = t, v
		}
	}
	return &taskstore.StoredTask{Task: task, Version: version, User: st.User}, nil
}

// reconcile brings a task whose run has ended up to date, and stores it.
func (ts *taskStore) reconcile(ctx context.Context, task *spec.Task, version taskstore.TaskVersion) (*spec.Task, taskstore.TaskVersion, bool) {
	res, err := ts.s.r.Status(ctx, ts.s.rt, string(task.ID))
	if err != nil || !res.Status.Ended() {
		return nil, 0, false
	}
	t := *task
	t.Artifacts = append([]*spec.Artifact(nil), task.Artifacts...)
	now := time.Now()
	for _, ev := range resultEvents(&t, res) {
		switch ev := ev.(type) {
		case *spec.TaskArtifactUpdateEvent:
			t.Artifacts = append(t.Artifacts, ev.Artifact)
		case *spec.TaskStatusUpdateEvent:
			t.Status = ev.Status
			t.Status.Timestamp = &now
		}
	}
	v, err := ts.Update(ctx, &taskstore.UpdateRequest{Task: &t, PrevTask: task, PrevVersion: version})
	if err != nil {
		ts.s.log.Warn("a2a: store a task's end", "task", task.ID, "err", err)
		return &t, version, true
	}
	return &t, v, true
}

func (ts *taskStore) List(ctx context.Context, req *spec.ListTasksRequest) (*spec.ListTasksResponse, error) {
	// The SDK's in-memory store filters and pages: give it the stored
	// tasks, each with its time.
	var at time.Time
	mem := taskstore.NewInMemory(&taskstore.InMemoryStoreConfig{
		TimeProvider:  func() time.Time { return at },
		Authenticator: func(context.Context) (string, error) { return "calf", nil },
	})
	after := ""
	for {
		recs, err := ts.st().List(ctx, KindTask, "", after, 500)
		if err != nil {
			return nil, err
		}
		for _, rec := range recs {
			var st storedTask
			if json.Unmarshal(rec.Data, &st) != nil || st.Task == nil {
				continue
			}
			at = st.UpdatedAt
			if _, err := mem.Create(ctx, st.Task); err != nil {
				return nil, err
			}
		}
		if len(recs) < 500 {
			break
		}
		after = recs[len(recs)-1].ID
	}
	return mem.List(ctx, req)
}

// sweepTasks removes the tasks that ended (completed, failed, cancelled,
// rejected) before before, as a runtime's sweep ([agent.Runtime.Sweep])
// does for their runs.
func sweepTasks(ctx context.Context, s store.Store, before time.Time) (int, int, error) {
	return sweep.Ended(ctx, s, KindTask, before, 0, func(data []byte) (time.Time, bool) {
		var st storedTask
		if json.Unmarshal(data, &st) != nil || st.Task == nil {
			return time.Time{}, false
		}
		return st.UpdatedAt, st.Task.Status.State.Terminal()
	}, nil)
}
