package launcher_test

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/launcher"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/runner"
)

// echoAgent answers each message with "echo: " and it, after the number
// of user messages it was given (the session's history).
func echoAgent(name string) runner.Runner {
	m := modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
		users := 0
		for _, msg := range req.Messages {
			if msg.Role == model.RoleUser {
				users++
			}
		}
		last := req.Messages[len(req.Messages)-1].Text()
		return modeltest.Text("echo " + strings.Repeat("+", users-1) + ": " + last), nil
	})
	return runner.Agent(agent.Must(agent.New(name, m, nil)))
}

func run(t *testing.T, ctx context.Context, cfg *launcher.Config, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errs strings.Builder
	code = launcher.Run(ctx, args, strings.NewReader(stdin), &out, &errs, cfg)
	return code, out.String(), errs.String()
}

// chat takes each line of standard input as a message of one session:
// the second answer was given the first exchange.
func TestChat(t *testing.T) {
	cfg := &launcher.Config{Name: "prog", Runners: []runner.Runner{echoAgent("echo")}, Store: "sqlite:" + filepath.Join(t.TempDir(), "calf.db")}
	code, out, errs := run(t, t.Context(), cfg, "hello\n\nagain\n/exit\nnever\n", "chat", "--session", "s1")
	if code != 0 || out != "echo : hello\necho +: again\n" {
		t.Fatalf("exit %d, output %q; stderr:\n%s", code, out, errs)
	}
	// The session is kept in the store: run continues it.
	if code, out, errs = run(t, t.Context(), cfg, "", "run", "--session", "s1", "and", "more"); code != 0 || out != "echo ++: and more\n" {
		t.Fatalf("run in the session: exit %d, output %q; stderr:\n%s", code, out, errs)
	}
}

// Mistakes in the command line are usage errors (exit 2) that say what to
// do, before anything is opened.
func TestUsage(t *testing.T) {
	cfg := &launcher.Config{Name: "prog", Runners: []runner.Runner{echoAgent("echo")}, Store: "memory:"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run"}, "needs a prompt"},
		{[]string{"run", "--agent", "nobody", "hi"}, `no such agent, team or workflow; known: echo`},
		{[]string{"worker"}, "reachable only from inside this process"},
		{[]string{"worker", "--broker", "nats://127.0.0.1:4222", "--store", "memory:"}, "keeps state inside this process"},
		{[]string{"serve", "--addr", "0.0.0.0:0"}, "listens beyond loopback"},
		{[]string{"serve", "--token", "short"}, "at least 16"},
		{[]string{"run", "--store", "nowhere", "hi"}, "no scheme"},
		{[]string{"frobnicate"}, "unknown command"},
	} {
		code, _, errs := run(t, t.Context(), cfg, "", c.args...)
		if code != launcher.ExitUsage || !strings.Contains(errs, c.want) || !strings.HasPrefix(errs, "prog: ") {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, errs, c.want)
		}
	}
	if code, _, errs := run(t, t.Context(), &launcher.Config{Name: "prog"}, "", "run", "hi"); code != launcher.ExitUsage || !strings.Contains(errs, "no agents") {
		t.Errorf("no runners: exit %d, %q", code, errs)
	}
}

// A worker serves the program's agents on a shared broker (the machine's
// NATS) and store: run, in another "process" on the same URLs, only
// starts the run, which the worker carries out; the worker drains and
// exits 0 when stopped.
func TestWorker(t *testing.T) {
	conn, err := net.DialTimeout("tcp", "127.0.0.1:4222", time.Second)
	if err != nil {
		t.Skip("no NATS server at 127.0.0.1:4222")
	}
	conn.Close()
	name := "launcher-echo-" + strings.ToLower(calf.NewID()[:8])
	broker, st := "nats://127.0.0.1:4222", "sqlite:"+filepath.Join(t.TempDir(), "calf.db")
	worker := &launcher.Config{Name: "prog", Runners: []runner.Runner{echoAgent(name)}, Broker: broker, Store: st}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	wctx, stop := context.WithCancel(ctx)
	done := make(chan int, 1)
	var werrs strings.Builder
	go func() {
		done <- launcher.Run(wctx, []string{"worker"}, strings.NewReader(""), &strings.Builder{}, &werrs, worker)
	}()
	// The caller's agent has a model that must not be called: the worker's
	// answers.
	unused := runner.Agent(agent.Must(agent.New(name, modeltest.NewTestModel(), nil)))
	caller := &launcher.Config{Name: "prog", Runners: []runner.Runner{unused}, Broker: broker, Store: st}
	var code int
	var out, errs string
	for {
		// Until the worker has subscribed: a run nothing took up fails
		// with "no worker serves".
		code, out, errs = run(t, ctx, caller, "", "run", "over", "there")
		if code == 0 || !strings.Contains(errs, "no worker serves") || ctx.Err() != nil {
			break
		}
	}
	if code != 0 || out != "echo : over there\n" {
		t.Errorf("run through the worker: exit %d, output %q; stderr:\n%s", code, out, errs)
	}
	stop()
	if code := <-done; code != 0 {
		t.Errorf("the worker ended with %d:\n%s", code, werrs.String())
	}
}
