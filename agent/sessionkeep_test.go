package agent_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/agent/session"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/tool"
)

// roles describes msgs by role, with "call" for an assistant message that
// makes tool calls: "user assistant user", say.
func roles(msgs []model.Message) string {
	var out []string
	for _, m := range msgs {
		r := string(m.Role)
		if len(m.ToolCalls) > 0 {
			r = "call"
		}
		out = append(out, r)
	}
	return strings.Join(out, " ")
}

// A run in a session with SessionAnswersOnly sees its tool calls and
// results while it works, keeps them in its record, and adds to the
// session only its input and its answer: the next run's model request
// holds the first exchange without its tool traffic. With the default,
// the next run sees all of it.
func TestSessionAnswersOnly(t *testing.T) {
	for _, answersOnly := range []bool{false, true} {
		for name, open := range sessionStores() {
			t.Run(map[bool]string{false: "all", true: "answers"}[answersOnly]+"/"+name, func(t *testing.T) {
				s := open(t)
				mb := memory.New(nil)
				c := calf.NewClient(mb, nil)
				t.Cleanup(func() {
					_ = c.Close()
					_ = mb.Close()
				})
				rt := agent.NewRuntime(c, s, nil)
				add := tool.Must(tool.New("add", "Add two integers.", func(_ context.Context, in addArgs) (int, error) {
					return in.A + in.B, nil
				}))
				var mu sync.Mutex
				var requests [][]model.Message
				m := modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
					mu.Lock()
					requests = append(requests, model.CloneMessages(req.Messages))
					mu.Unlock()
					last := req.Messages[len(req.Messages)-1]
					switch {
					case last.Role == model.RoleTool:
						return modeltest.Text("2 and 3 make " + last.Text()), nil
					case strings.HasPrefix(last.Text(), "add"):
						r := modeltest.ToolCalls(modeltest.Call("call_1", "add", `{"a":2,"b":3}`))
						r.Message.Parts = []model.Part{model.TextPart("Let me add them.")}
						return r, nil
					}
					return modeltest.Text("you are welcome"), nil
				})
				a := agent.Must(agent.New("keeper", m, &agent.Options{Tools: []tool.Tool{add}, SessionAnswersOnly: answersOnly}))
				if err := a.Serve(t.Context(), rt, nil); err != nil {
					t.Fatal(err)
				}
				out, err := a.Run(runCtx(t), rt, "add 2 and 3", &agent.RunOptions{RunID: "t1", SessionID: "s"})
				if err != nil || out.Output != "2 and 3 make 5" {
					t.Fatalf("turn 1: %+v, %v", out, err)
				}
				if _, err := a.Run(runCtx(t), rt, "thanks", &agent.RunOptions{RunID: "t2", SessionID: "s"}); err != nil {
					t.Fatal(err)
				}
				mu.Lock()
				defer mu.Unlock()
				if len(requests) != 3 {
					t.Fatalf("%d model calls, want 3", len(requests))
				}
				// Within turn 1, the model sees its call and the result.
				if got := roles(requests[1]); got != "user call tool" {
					t.Errorf("turn 1's second request: %s", got)
				}
				want := "user call tool assistant user"
				if answersOnly {
					want = "user assistant user"
				}
				if got := roles(requests[2]); got != want {
					t.Errorf("turn 2's request: %s, want %s", got, want)
				}
				if got := requests[2][1].Text(); answersOnly && got != "2 and 3 make 5" {
					t.Errorf("turn 2 sees the answer %q", got)
				}
				// The run's record keeps its tool traffic.
				info, err := rt.LoadAgentRun(t.Context(), "t1")
				if err != nil {
					t.Fatal(err)
				}
				if got := roles(info.NewMessages()); got != "user call tool assistant" || len(info.ToolCalls) != 1 {
					t.Errorf("run t1 holds %s and %d tool calls", got, len(info.ToolCalls))
				}
				sess, err := session.Load(t.Context(), s, "s")
				if err != nil {
					t.Fatal(err)
				}
				want = strings.TrimSuffix(want, " user") + " user assistant"
				if got := roles(sess.Messages); got != want || !slices.Equal(sess.Runs, []string{"t1", "t2"}) {
					t.Errorf("session: %s, runs %v; want %s", got, sess.Runs, want)
				}
			})
		}
	}
}
