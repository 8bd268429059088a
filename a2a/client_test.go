package a2a_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/calf-go/calf/a2a"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/internal/peers"
	"github.com/calf-go/calf/internal/testwait"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/team"
	"github.com/calf-go/calf/tool"
)

// jsAgent starts the @a2a-js/sdk agent of internal/peers/a2a/server.mjs
// and returns its base URL.
func jsAgent(t *testing.T) string {
	t.Helper()
	node := peers.Node(t)
	peers.Package(t, "@a2a-js/sdk/package.json")
	cmd := exec.Command(node, filepath.Join(peers.Dir(), "a2a", "server.mjs"), "0")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	lines := bufio.NewScanner(out)
	port := make(chan string, 1)
	go func() {
		for lines.Scan() {
			if p, ok := strings.CutPrefix(lines.Text(), "listening "); ok {
				port <- p
			}
		}
	}()
	select {
	case p := <-port:
		return "http://127.0.0.1:" + p
	case <-time.After(30 * time.Second):
		t.Fatal("the JavaScript agent did not start")
	}
	return ""
}

// A remote A2A agent (on @a2a-js/sdk) as a Calf agent: its answer, its
// streamed events in RunStream, a failed task, a task that asks for input
// and takes the session's next message, streaming and not.
func TestRemoteAgent(t *testing.T) {
	url := jsAgent(t)
	rt := newRuntime(t, nil)
	ctx := runCtx(t)
	for _, noStream := range []bool{false, true} {
		name := "js"
		if noStream {
			name = "jsplain"
		}
		r, err := a2a.NewRemote(ctx, name, url, &a2a.RemoteOptions{NoStreaming: noStream})
		if err != nil {
			t.Fatal(err)
		}
		if r.Description() != "A JavaScript agent that answers politely." {
			t.Errorf("description %q", r.Description())
		}
		if err := r.Serve(ctx, rt, nil); err != nil {
			t.Fatal(err)
		}
		var kinds []string
		var answer string
		for ev, err := range r.RunStream(ctx, rt, "hello", nil) {
			if err != nil {
				t.Fatal(err)
			}
			if ev.Kind == agent.EventCustom {
				kinds = append(kinds, ev.Custom.Type)
			}
			if ev.Kind == agent.EventOutput {
				answer, _ = r.DecodeOutput(ev.Output)
			}
		}
		if answer != "js says: hello" {
			t.Errorf("%s: answer %q", name, answer)
		}
		if got := strings.Join(kinds, " "); !noStream && (!strings.Contains(got, "a2a.artifact") || !strings.Contains(got, "a2a.status")) {
			t.Errorf("%s: custom events %q; want the remote's status and artifact updates", name, got)
		}
		_, err = r.Run(ctx, rt, "please fail", nil)
		if err == nil || !strings.Contains(err.Error(), "it went wrong") || !strings.Contains(err.Error(), "did not complete") {
			t.Errorf("%s: a failed remote task: %v", name, err)
		}
		sess := &agent.RunOptions{SessionID: "s-" + name}
		out, err := r.Run(ctx, rt, "ask", sess)
		if err != nil || out.Output != "what is your name?" {
			t.Fatalf("%s: ask: %v, %v", name, out, err)
		}
		st, _ := r.State(ctx, rt, "s-"+name)
		if st.TaskID == "" || st.ContextID == "" {
			t.Errorf("%s: state after input-required: %+v", name, st)
		}
		out, err = r.Run(ctx, rt, "Ada", sess)
		if err != nil || out.Output != "thanks for: Ada" {
			t.Errorf("%s: the answer to the question: %v, %v", name, out, err)
		}
	}
}

// A remote agent as a team member, a subagent and a handoff target.
func TestRemoteAgentInTeamsAndTools(t *testing.T) {
	url := jsAgent(t)
	rt := newRuntime(t, nil)
	ctx := runCtx(t)
	r, err := a2a.NewRemote(ctx, "js", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Serve(ctx, rt, nil); err != nil {
		t.Fatal(err)
	}
	upper := agent.Must(agent.New("upper", modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
		return modeltest.Text(strings.ToUpper(req.Messages[len(req.Messages)-1].Text())), nil
	}), nil))
	if err := upper.Serve(ctx, rt, nil); err != nil {
		t.Fatal(err)
	}
	tm := team.Must(team.NewSequential("pipeline", []team.Member{team.AgentMember(r.Agent), team.AgentMember(upper)}, nil))
	if err := tm.Serve(ctx, rt, nil); err != nil {
		t.Fatal(err)
	}
	out, err := tm.Run(ctx, rt, "team work", nil)
	if err != nil || out.Output != "JS SAYS: TEAM WORK" {
		t.Errorf("team: %+v, %v", out, err)
	}

	var mu sync.Mutex
	var seen []string
	ask := tool.Must(agent.AsTool(r.Agent, nil))
	caller := agent.Must(agent.New("caller", modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == model.RoleTool {
			mu.Lock()
			seen = append(seen, last.Text())
			mu.Unlock()
			return modeltest.Text("ok"), nil
		}
		return modeltest.ToolCalls(modeltest.Call("c", "js", `{"input":"from a tool"}`)), nil
	}), &agent.Options{Tools: []tool.Tool{ask}}))
	if err := caller.Serve(ctx, rt, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := caller.Run(ctx, rt, "go", nil); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 1 || seen[0] != "js says: from a tool" {
		t.Errorf("subagent result %q", seen)
	}

	transfer := tool.Must(agent.Handoff(r.Agent, nil))
	triage := agent.Must(agent.New("triage", modeltest.FunctionModel(func(context.Context, *model.Request) (*model.Response, error) {
		return modeltest.ToolCalls(modeltest.Call("h", transfer.Definition().Name, `{}`)), nil
	}), &agent.Options{Tools: []tool.Tool{transfer}}))
	if err := triage.Serve(ctx, rt, nil); err != nil {
		t.Fatal(err)
	}
	hout, err := triage.Run(ctx, rt, "I need the JS agent", nil)
	if err != nil || hout.Agent != "js" || !strings.HasPrefix(hout.Output, "js says: The conversation so far:") || !strings.Contains(hout.Output, "I need the JS agent") {
		t.Errorf("handoff: %+v, %v", hout, err)
	}
}

// A Calf agent behind our A2A server, used by our A2A client: Calf talks
// to Calf. A run that times out cancels the remote task.
func TestRemoteCalfAgentAndTimeout(t *testing.T) {
	rt := newRuntime(t, nil)
	release := make(chan struct{})
	defer close(release)
	srv := newA2AServer(t, rt, newHelper(t, rt, release), "k")
	ctx := runCtx(t)
	r, err := a2a.NewRemote(ctx, "calfy", srv.URL, &a2a.RemoteOptions{Token: "k", Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	callerRT := newRuntime(t, nil)
	if err := r.Serve(ctx, callerRT, nil); err != nil {
		t.Fatal(err)
	}
	out, err := r.Run(ctx, callerRT, "over a2a", nil)
	if err != nil || out.Output != "done: over a2a" {
		t.Fatalf("calf to calf: %v, %v", out, err)
	}
	_, err = r.Run(ctx, callerRT, "wait", &agent.RunOptions{RunID: "slow"})
	if err == nil || !strings.Contains(err.Error(), "timed out") {
		t.Errorf("a run past its timeout: %v", err)
	}
	// The remote task was cancelled: its Calf run ends cancelled.
	testwait.ForErr(t, 20*time.Second, "the remote task to be cancelled", func() error {
		recs, _ := rt.Store().List(ctx, "run", "", "", 0)
		cancelled := 0
		for _, rec := range recs {
			if strings.Contains(string(rec.Data), `"status":"cancelled"`) {
				cancelled++
			}
		}
		if cancelled != 1 {
			return fmt.Errorf("%d runs cancelled of %d", cancelled, len(recs))
		}
		return nil
	})
}

// A card URL that is not one: a clear error.
func TestRemoteBadCard(t *testing.T) {
	ctx := runCtx(t)
	notJSON := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("<html>hello</html>"))
	}))
	defer notJSON.Close()
	for _, u := range []string{notJSON.URL, notJSON.URL + "/card.json", "ftp://example.com/card", "http://127.0.0.1:1/"} {
		_, err := a2a.NewRemote(ctx, "x", u, nil)
		if err == nil || !strings.Contains(err.Error(), "a2a:") {
			t.Errorf("card %s: %v; want a clear error", u, err)
		}
	}
}
