package a2a_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	spec "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/a2a"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/runner"
	"github.com/calf-go/calf/store/sqlite"
)

// keyedMessage is a message with the id id and the text text.
func keyedMessage(id, text string) *spec.SendMessageRequest {
	m := spec.NewMessage(spec.MessageRoleUser, spec.NewTextPart(text))
	m.ID = id
	return &spec.SendMessageRequest{Message: m}
}

// A client sends the same message (the same messageId) five times, over
// message/send and message/stream, the last two after the server
// restarted on the same store: one task, one run (one model call), the
// same answer; another message under the messageId is refused with
// invalid params; once the window has passed, the messageId starts a
// new task.
func TestServerMessageIDIsIdempotencyKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "calf.db")
	var offset atomic.Int64 // the clock, moved by hand
	now := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	var calls atomic.Int64
	ctx := runCtx(t)
	process := func() (*a2aclient.Client, *agent.Runtime, func()) {
		st, err := sqlite.Open(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		b := memory.New(nil)
		c := calf.NewClient(b, nil)
		pctx, cancel := context.WithCancel(ctx)
		rt := agent.NewRuntime(c, st, &agent.RuntimeOptions{Now: now, IdempotencyWindow: time.Hour})
		a := agent.Must(agent.New("helper", modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
			n := calls.Add(1)
			return modeltest.Text("done: " + req.Messages[len(req.Messages)-1].Text() + " #" + string(rune('0'+n))), nil
		}), &agent.Options{Description: "Does things."}))
		if err := a.Serve(pctx, rt, nil); err != nil {
			t.Fatal(err)
		}
		var h atomic.Pointer[a2a.Server]
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.Load().ServeHTTP(w, r) }))
		h.Store(a2a.NewServer(rt, runner.Agent(a), &a2a.ServerOptions{URL: srv.URL}))
		cl, err := a2aclient.NewFromEndpoints(ctx, []*spec.AgentInterface{spec.NewAgentInterface(srv.URL, spec.TransportProtocolJSONRPC)})
		if err != nil {
			t.Fatal(err)
		}
		return cl, rt, func() {
			cl.Destroy()
			srv.Close()
			cancel()
			_ = c.Close()
			_ = b.Close()
			_ = st.Close()
		}
	}
	cl, rt, stop := process()
	defer func() { stop() }()
	send := func(i int, req *spec.SendMessageRequest) (spec.TaskID, string, error) {
		t.Helper()
		if i%2 == 0 {
			res, err := cl.SendMessage(ctx, req)
			if err != nil {
				return "", "", err
			}
			task, ok := res.(*spec.Task)
			if !ok || task.Status.State != spec.TaskStateCompleted {
				t.Fatalf("send %d: %#v", i+1, res)
			}
			return task.ID, artifactText(task), nil
		}
		var id spec.TaskID
		var text strings.Builder
		for ev, err := range cl.SendStreamingMessage(ctx, req) {
			if err != nil {
				return "", "", err
			}
			id = ev.TaskInfo().TaskID
			switch ev := ev.(type) {
			case *spec.Task:
				if s := artifactText(ev); s != "" {
					text.Reset()
					text.WriteString(s)
				}
			case *spec.TaskArtifactUpdateEvent:
				for _, p := range ev.Artifact.Parts {
					text.WriteString(p.Text())
				}
			}
		}
		return id, text.String(), nil
	}
	var firstID spec.TaskID
	for i := range 5 {
		if i == 3 {
			stop()
			cl, rt, stop = process()
		}
		id, text, err := send(i, keyedMessage("m-1", "hello"))
		if err != nil {
			t.Fatalf("send %d: %v", i+1, err)
		}
		if text != "done: hello #1" {
			t.Errorf("send %d answered %q, want %q", i+1, text, "done: hello #1")
		}
		if i == 0 {
			firstID = id
		} else if id != firstID {
			t.Errorf("send %d: task %s, want %s", i+1, id, firstID)
		}
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("%d model calls for five sends of one message, want 1", n)
	}
	for kind, want := range map[string]int{a2a.KindTask: 1, "run": 1} {
		if recs, err := rt.Store().List(ctx, kind, "", "", 0); err != nil || len(recs) != want {
			t.Errorf("%d records of kind %s (%v), want %d", len(recs), kind, err, want)
		}
	}
	for i := range 2 {
		_, _, err := send(i, keyedMessage("m-1", "something else"))
		if !errors.Is(err, spec.ErrInvalidParams) || !strings.Contains(err.Error(), `messageId "m-1" was sent before with another message`) {
			t.Errorf("another message under the messageId (send %d): %v, want invalid params", i+1, err)
		}
	}
	offset.Add(int64(2 * time.Hour)) // past the window
	id, text, err := send(0, keyedMessage("m-1", "hello"))
	if err != nil || id == firstID || text != "done: hello #2" {
		t.Errorf("the messageId after its window: task %s, %q, %v; want a new task", id, text, err)
	}
}

// The same message sent again while its task is in progress waits for
// that task, over message/send and message/stream: one task, one run.
func TestServerMessageIDInProgress(t *testing.T) {
	rt := newRuntime(t, nil)
	release := make(chan struct{})
	helper := newHelper(t, rt, release)
	srv := newA2AServer(t, rt, helper, "")
	ctx := runCtx(t)
	cl, err := a2aclient.NewFromEndpoints(ctx, []*spec.AgentInterface{spec.NewAgentInterface(srv.URL, spec.TransportProtocolJSONRPC)})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Destroy()
	type answer struct {
		id   spec.TaskID
		text string
		err  error
	}
	answers := make(chan answer, 3)
	sendOnce := func() {
		res, err := cl.SendMessage(ctx, keyedMessage("m-wait", "wait"))
		if err != nil {
			answers <- answer{err: err}
			return
		}
		task, _ := res.(*spec.Task)
		if task == nil {
			answers <- answer{err: errors.New("not a task")}
			return
		}
		answers <- answer{id: task.ID, text: artifactText(task)}
	}
	go sendOnce()
	waitForWorking(t, ctx, rt)
	go sendOnce()
	go func() {
		var a answer
		for ev, err := range cl.SendStreamingMessage(ctx, keyedMessage("m-wait", "wait")) {
			if err != nil {
				a.err = err
				break
			}
			a.id = ev.TaskInfo().TaskID
			if ae, ok := ev.(*spec.TaskArtifactUpdateEvent); ok {
				a.text += ae.Artifact.Parts[0].Text()
			}
			if task, ok := ev.(*spec.Task); ok && artifactText(task) != "" {
				a.text = artifactText(task)
			}
		}
		answers <- a
	}()
	close(release)
	var first spec.TaskID
	for i := range 3 {
		a := <-answers
		if a.err != nil || a.text != "done: wait" {
			t.Errorf("answer %d: %+v", i+1, a)
		}
		if i == 0 {
			first = a.id
		} else if a.id != first {
			t.Errorf("answer %d: task %s, want %s", i+1, a.id, first)
		}
	}
	if recs, err := rt.Store().List(ctx, a2a.KindTask, "", "", 0); err != nil || len(recs) != 1 {
		t.Errorf("%d tasks (%v), want 1", len(recs), err)
	}
}

// waitForWorking waits until a task of rt is working.
func waitForWorking(t *testing.T, ctx context.Context, rt *agent.Runtime) {
	t.Helper()
	for ctx.Err() == nil {
		recs, _ := rt.Store().List(ctx, a2a.KindTask, "", "", 0)
		if len(recs) == 1 && strings.Contains(string(recs[0].Data), "WORKING") {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("no task is working")
}
