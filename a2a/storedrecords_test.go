package a2a_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	spec "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"

	"github.com/calf-go/calf/a2a"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/store"
	storemem "github.com/calf-go/calf/store/memory"
)

// storedRecord is a record of testdata/records: kind, id and data as an
// earlier version wrote them; see testdata/records/README.md.
type storedRecord struct {
	Kind string          `json:"kind"`
	ID   string          `json:"id"`
	Data json.RawMessage `json:"data"`
}

// storedStore is a memory store holding the records of the fixture name.
func storedStore(t *testing.T, name string) store.Store {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "records", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var recs []storedRecord
	if err := json.Unmarshal(data, &recs); err != nil {
		t.Fatal(err)
	}
	s := storemem.New()
	for _, r := range recs {
		if _, err := s.Put(t.Context(), r.Kind, r.ID, r.Data, 0); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// What the A2A server and remote agents of an earlier version stored is
// read by this version: see storedTasks and storedRemote.
func TestStoredRecords(t *testing.T) {
	t.Run("tasks", storedTasks)
	t.Run("remote", storedRemote)
}

// A2A tasks stored by an earlier version's server are answered by this
// one: each state read through the SDK's client, listed by context, the
// working task's run recovered and the task then reported completed from
// it, a context continued with its history, and the ended tasks swept.
func storedTasks(t *testing.T) {
	const (
		completed = "01a24f25-4d54-7dd1-a9c3-99ae541cb0c0"
		failed    = "01a24f25-4d57-7630-9c9d-ae0994aa6ae3"
		cancelled = "01a24f25-4d58-779a-9d0b-58f81914f41e"
		working   = "01a24f25-4d5a-71d7-827a-9ad08159d67c"
	)
	s := storedStore(t, "tasks")
	rt := newRuntime(t, s)
	var seen []string
	helper := agent.Must(agent.New("helper", modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
		seen = seen[:0]
		for _, m := range req.Messages {
			seen = append(seen, m.Text())
		}
		return modeltest.Text("done: " + req.Messages[len(req.Messages)-1].Text()), nil
	}), &agent.Options{Description: "Does things."}))
	srv := newA2AServer(t, rt, helper, "")
	ctx := runCtx(t)
	c, err := a2aclient.NewFromEndpoints(ctx, []*spec.AgentInterface{spec.NewAgentInterface(srv.URL, spec.TransportProtocolJSONRPC)})
	if err != nil {
		t.Fatal(err)
	}
	get := func(id string) *spec.Task {
		t.Helper()
		task, err := c.GetTask(ctx, &spec.GetTaskRequest{ID: spec.TaskID(id)})
		if err != nil {
			t.Fatalf("GetTask(%s): %v", id, err)
		}
		return task
	}
	firstText := func(task *spec.Task) string {
		if len(task.History) == 0 || task.History[0].Role != spec.MessageRoleUser {
			return ""
		}
		return a2a.PartsText(task.History[0].Parts)
	}
	statusText := func(task *spec.Task) string {
		if task.Status.Message == nil {
			return ""
		}
		return a2a.PartsText(task.Status.Message.Parts)
	}

	if task := get(completed); task.Status.State != spec.TaskStateCompleted || task.ContextID != "ctx-chat" ||
		artifactText(task) != "done: hello" || firstText(task) != "hello" || len(task.History) != 2 || task.Status.Timestamp == nil {
		t.Errorf("the completed task: %+v", task)
	}
	if task := get(failed); task.Status.State != spec.TaskStateFailed || task.ContextID != "ctx-fail" ||
		!strings.Contains(statusText(task), "the model refused") || firstText(task) != "fail" || len(task.Artifacts) != 0 {
		t.Errorf("the failed task: %+v", task)
	}
	if task := get(cancelled); task.Status.State != spec.TaskStateCanceled || task.ContextID != "ctx-cancel" || firstText(task) != "cancel me" {
		t.Errorf("the cancelled task: %+v", task)
	}
	if task := get(working); task.Status.State != spec.TaskStateWorking || task.ContextID != "ctx-wait" || firstText(task) != "wait" {
		t.Errorf("the working task, its run not yet recovered: %+v", task)
	}
	list, err := c.ListTasks(ctx, &spec.ListTasksRequest{})
	if err != nil || len(list.Tasks) != 4 {
		t.Fatalf("ListTasks = %+v, %v", list, err)
	}
	if list, err := c.ListTasks(ctx, &spec.ListTasksRequest{ContextID: "ctx-fail"}); err != nil || len(list.Tasks) != 1 || string(list.Tasks[0].ID) != failed {
		t.Errorf("ListTasks(ctx-fail) = %+v, %v", list, err)
	}

	// The working task's run goes on here; the task then reads its end.
	if err := helper.Serve(ctx, rt, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := helper.Recover(ctx, rt, nil); err != nil {
		t.Fatal(err)
	}
	if out, err := helper.Wait(ctx, rt, working); err != nil || out.Output != "done: wait" {
		t.Fatalf("the working task's run, recovered: %+v, %v", out, err)
	}
	if task := get(working); task.Status.State != spec.TaskStateCompleted || artifactText(task) != "done: wait" {
		t.Errorf("the working task after its run ended: %+v", task)
	}

	// The stored context goes on with its history.
	req := userMessage("again")
	req.Message.ContextID = "ctx-chat"
	res, err := c.SendMessage(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if task, ok := res.(*spec.Task); !ok || task.Status.State != spec.TaskStateCompleted || artifactText(task) != "done: again" ||
		strings.Join(seen, "|") != "hello|done: hello|again" {
		t.Errorf("a task continuing ctx-chat: %#v; the model saw %q", res, seen)
	}

	// The ended tasks are swept with their runs.
	if _, err := rt.Sweep(ctx, agent.SweepOptions{Before: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{completed, failed, cancelled, working} {
		if _, err := s.Get(ctx, a2a.KindTask, id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("task %s after the sweep: %v", id, err)
		}
	}
}

// The state a remote agent of an earlier version kept for its session
// names the remote context it continues: read as stored, and continued by
// this version's remote agent, whose server (this version's, on the stored
// tasks and sessions) answers with the context's history.
func storedRemote(t *testing.T) {
	const remoteContext = "01a24f31-166c-7648-8190-67f46eef65a9"
	s := storedStore(t, "remote")
	rt := newRuntime(t, s)
	var seen []string
	helper := agent.Must(agent.New("helper", modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
		seen = seen[:0]
		for _, m := range req.Messages {
			seen = append(seen, m.Text())
		}
		return modeltest.Text("done: " + req.Messages[len(req.Messages)-1].Text()), nil
	}), &agent.Options{Description: "Does things."}))
	if err := helper.Serve(t.Context(), rt, nil); err != nil {
		t.Fatal(err)
	}
	srv := newA2AServer(t, rt, helper, "")
	ctx := runCtx(t)
	remote, err := a2a.NewRemote(ctx, "remote", srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := remote.State(ctx, rt, "s-remote"); err != nil || st.ContextID != remoteContext || st.TaskID != "" {
		t.Errorf("the stored remote state: %+v, %v", st, err)
	}
	if err := remote.Serve(ctx, rt, nil); err != nil {
		t.Fatal(err)
	}
	out, err := remote.Run(ctx, rt, "second", &agent.RunOptions{SessionID: "s-remote"})
	if err != nil || out.Output != "done: second" || strings.Join(seen, "|") != "first|done: first|second" {
		t.Errorf("the remote session continued: %+v, %v; the remote model saw %q", out, err, seen)
	}
	if st, err := remote.State(ctx, rt, "s-remote"); err != nil || st.ContextID != remoteContext {
		t.Errorf("the remote state after the run: %+v, %v", st, err)
	}
}
