package a2a_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	spec "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/a2a"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/runner"
	"github.com/calf-go/calf/store"
	storemem "github.com/calf-go/calf/store/memory"
)

func newRuntime(t *testing.T, st store.Store) *agent.Runtime {
	t.Helper()
	b := memory.New(nil)
	c := calf.NewClient(b, nil)
	if st == nil {
		st = storemem.New()
	}
	t.Cleanup(func() { _ = c.Close(); _ = b.Close() })
	return agent.NewRuntime(c, st, nil)
}

func runCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// newHelper serves an agent that answers "done: PROMPT", and for "wait"
// waits until release is closed.
func newHelper(t *testing.T, rt *agent.Runtime, release chan struct{}) *agent.Agent[string] {
	t.Helper()
	m := modeltest.FunctionModel(func(ctx context.Context, req *model.Request) (*model.Response, error) {
		p := req.Messages[len(req.Messages)-1].Text()
		if p == "wait" {
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return modeltest.Text("done: " + p), nil
	})
	a := agent.Must(agent.New("helper", m, &agent.Options{Description: "Does things."}))
	if err := a.Serve(t.Context(), rt, nil); err != nil {
		t.Fatal(err)
	}
	return a
}

func newA2AServer(t *testing.T, rt *agent.Runtime, a *agent.Agent[string], token string) *httptest.Server {
	t.Helper()
	// The server's card needs its URL, known once it listens.
	var h atomic.Pointer[a2a.Server]
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.Load().ServeHTTP(w, r) }))
	h.Store(a2a.NewServer(rt, runner.Agent(a), &a2a.ServerOptions{URL: srv.URL, Token: token}))
	t.Cleanup(srv.Close)
	return srv
}

func userMessage(text string) *spec.SendMessageRequest {
	return &spec.SendMessageRequest{Message: spec.NewMessage(spec.MessageRoleUser, spec.NewTextPart(text))}
}

func artifactText(task *spec.Task) string {
	var b strings.Builder
	for _, a := range task.Artifacts {
		for _, p := range a.Parts {
			b.WriteString(p.Text())
		}
	}
	return b.String()
}

// The SDK's client drives the server over JSON-RPC and over REST: send,
// stream, get and cancel, each task a Calf run.
func TestServerWithSDKClient(t *testing.T) {
	rt := newRuntime(t, nil)
	release := make(chan struct{})
	defer close(release)
	helper := newHelper(t, rt, release)
	srv := newA2AServer(t, rt, helper, "")
	ctx := runCtx(t)
	card, err := agentcard.NewResolver(nil).Resolve(ctx, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if card.Name != "helper" || card.Description != "Does things." || !card.Capabilities.Streaming || len(card.SupportedInterfaces) != 2 {
		t.Fatalf("card %+v", card)
	}
	for _, iface := range card.SupportedInterfaces {
		t.Run(string(iface.ProtocolBinding), func(t *testing.T) {
			c, err := a2aclient.NewFromEndpoints(ctx, []*spec.AgentInterface{iface})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Destroy()
			res, err := c.SendMessage(ctx, userMessage("hello"))
			if err != nil {
				t.Fatal(err)
			}
			task, ok := res.(*spec.Task)
			if !ok || task.Status.State != spec.TaskStateCompleted || artifactText(task) != "done: hello" {
				t.Fatalf("send: %#v", res)
			}
			// The task is a Calf run with the task's id.
			st, err := rt.LoadAgentRun(ctx, string(task.ID))
			if err != nil || st.Status != agent.RunComplete {
				t.Errorf("run %s: %+v, %v", task.ID, st, err)
			}
			got, err := c.GetTask(ctx, &spec.GetTaskRequest{ID: task.ID})
			if err != nil || got.Status.State != spec.TaskStateCompleted || artifactText(got) != "done: hello" {
				t.Errorf("get: %+v, %v", got, err)
			}

			var states []string
			var text string
			for ev, err := range c.SendStreamingMessage(ctx, userMessage("stream me")) {
				if err != nil {
					t.Fatal(err)
				}
				switch ev := ev.(type) {
				case *spec.Task:
					states = append(states, "task")
				case *spec.TaskStatusUpdateEvent:
					states = append(states, string(ev.Status.State))
				case *spec.TaskArtifactUpdateEvent:
					for _, p := range ev.Artifact.Parts {
						text += p.Text()
					}
				}
			}
			if text != "done: stream me" || len(states) < 3 || states[len(states)-1] != string(spec.TaskStateCompleted) {
				t.Errorf("stream: states %v, text %q", states, text)
			}

			// A task cancelled while its run waits: the run is cancelled.
			req := userMessage("wait")
			req.Config = &spec.SendMessageConfig{ReturnImmediately: true}
			res, err = c.SendMessage(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			waiting := res.(*spec.Task)
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				if _, err := rt.LoadAgentRun(ctx, string(waiting.ID)); err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the waiting task's run did not start")
				}
			}
			cancelled, err := c.CancelTask(ctx, &spec.CancelTaskRequest{ID: waiting.ID})
			if err != nil || cancelled.Status.State != spec.TaskStateCanceled {
				t.Fatalf("cancel: %+v, %v", cancelled, err)
			}
			st, err = rt.LoadAgentRun(ctx, string(waiting.ID))
			if err != nil || st.Status != agent.RunCancelled {
				t.Errorf("the cancelled task's run: %+v, %v", st, err)
			}
			// An unknown task.
			if _, err := c.GetTask(ctx, &spec.GetTaskRequest{ID: "no-such-task"}); err == nil {
				t.Error("get of an unknown task: no error")
			}
		})
	}
}

// A task whose process stopped before it ended is answered from its run:
// a server started again on the same store reports the run's end.
func TestTaskStatusFromTheRun(t *testing.T) {
	st := storemem.New()
	rt := newRuntime(t, st)
	helper := newHelper(t, rt, nil)
	ctx := runCtx(t)
	// The task as a process left it, working, and its run, which went on
	// elsewhere and completed.
	id := "task-1"
	task := &spec.Task{ID: spec.TaskID(id), ContextID: "ctx-1", Status: spec.TaskStatus{State: spec.TaskStateWorking}}
	data, _ := json.Marshal(map[string]any{"task": task, "updated_at": time.Now()})
	if _, err := st.Put(ctx, a2a.KindTask, id, data, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := helper.Run(ctx, rt, "finish", &agent.RunOptions{RunID: id}); err != nil {
		t.Fatal(err)
	}
	srv := newA2AServer(t, newRuntime(t, st), helper, "")
	c, err := a2aclient.NewFromEndpoints(ctx, []*spec.AgentInterface{spec.NewAgentInterface(srv.URL, spec.TransportProtocolJSONRPC)})
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.GetTask(ctx, &spec.GetTaskRequest{ID: spec.TaskID(id)})
	if err != nil || got.Status.State != spec.TaskStateCompleted || artifactText(got) != "done: finish" {
		t.Fatalf("get: %+v, %v", got, err)
	}
	list, err := c.ListTasks(ctx, &spec.ListTasksRequest{ContextID: "ctx-1"})
	if err != nil || len(list.Tasks) != 1 || list.Tasks[0].Status.State != spec.TaskStateCompleted {
		t.Errorf("list: %+v, %v", list, err)
	}
}

// Bad input: a missing or wrong token, malformed JSON, a wrong protocol
// version: refused with clear errors.
func TestServerRefusals(t *testing.T) {
	rt := newRuntime(t, nil)
	helper := newHelper(t, rt, nil)
	srv := newA2AServer(t, rt, helper, "s3cret")
	post := func(body string, hdr map[string]string) (int, string) {
		req, _ := http.NewRequest("POST", srv.URL, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		buf := make([]byte, 4096)
		n, _ := resp.Body.Read(buf)
		b.Write(buf[:n])
		return resp.StatusCode, b.String()
	}
	get := `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"nope"}}`
	if code, body := post(get, nil); code != 401 || !strings.Contains(body, `"code":"invalid_api_key"`) {
		t.Errorf("no token: %d %s; want 401 invalid_api_key", code, body)
	}
	if code, _ := post(get, map[string]string{"Authorization": "Bearer nope"}); code != 401 {
		t.Errorf("wrong token: %d", code)
	}
	auth := map[string]string{"Authorization": "Bearer s3cret", "A2A-Version": "1.0"}
	if _, body := post(`{"jsonrpc":`, auth); !strings.Contains(strings.ToLower(body), "parse") {
		t.Errorf("malformed JSON: %s", body)
	}
	if _, body := post(get, auth); !strings.Contains(strings.ToLower(body), "not found") {
		t.Errorf("unknown task: %s", body)
	}
	old := map[string]string{"Authorization": "Bearer s3cret", "A2A-Version": "0.1"}
	if _, body := post(get, old); !strings.Contains(strings.ToLower(body), "version") {
		t.Errorf("wrong version header: %s", body)
	}
	// The card is public.
	resp, err := http.Get(srv.URL + "/.well-known/agent-card.json")
	if err != nil || resp.StatusCode != 200 {
		t.Errorf("card: %v, %v", resp, err)
	}
	resp.Body.Close()
}

// The runtime's sweep removes ended tasks with their runs.
func TestSweepTasks(t *testing.T) {
	rt := newRuntime(t, nil)
	srv := newA2AServer(t, rt, newHelper(t, rt, nil), "")
	ctx := runCtx(t)
	c, err := a2aclient.NewFromEndpoints(ctx, []*spec.AgentInterface{spec.NewAgentInterface(srv.URL, spec.TransportProtocolJSONRPC)})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.SendMessage(ctx, userMessage("sweep me"))
	if err != nil {
		t.Fatal(err)
	}
	id := string(res.(*spec.Task).ID)
	swept, err := rt.Sweep(ctx, agent.SweepOptions{Before: time.Now().Add(time.Minute)})
	if err != nil || swept.Runs != 2 {
		t.Fatalf("sweep: %+v, %v; want the task and its run", swept, err)
	}
	if _, err := rt.Store().Get(ctx, a2a.KindTask, id); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the task after the sweep: %v", err)
	}
}
