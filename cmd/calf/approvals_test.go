package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/adapters"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/agent/approval"
	"github.com/calf-go/calf/internal/testwait"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/tool"
)

// calf approvals lists the requests a served agent made, and approve and
// deny answer them through the workers' broker (an in-process Kafka
// cluster here), where the worker carries the answer out.
func TestApprovalsCommands(t *testing.T) {
	isolate(t)
	ctx := t.Context()
	storeURL := "sqlite:" + filepath.Join(t.TempDir(), "calf.db")
	brokerURL := kafkaBrokerURL(t)
	st, err := adapters.OpenStore(ctx, storeURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	b, err := adapters.OpenBroker(ctx, brokerURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	c := calf.NewClient(b, nil)
	defer c.Close()
	rt := agent.NewRuntime(c, st, nil)

	var ran atomic.Value
	type target struct {
		Env string `json:"env"`
	}
	deploy := tool.Must(tool.New("deploy", "Deploy.", func(_ context.Context, in target) (string, error) {
		ran.Store(in.Env)
		return "deployed to " + in.Env, nil
	}))
	m := modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == model.RoleTool {
			return modeltest.Text(last.Text()), nil
		}
		return modeltest.ToolCalls(modeltest.Call("c1", "deploy", `{"env":"production"}`)), nil
	})
	ops := agent.Must(agent.New("ops", m, &agent.Options{
		Tools: []tool.Tool{deploy}, Permissions: &agent.Permissions{Mode: agent.PermissionAcceptEdits},
	}))
	if err := ops.Serve(ctx, rt, nil); err != nil {
		t.Fatal(err)
	}
	type outcome struct {
		out *agent.Output[string]
		err error
	}
	start := func(id string) chan outcome {
		done := make(chan outcome, 1)
		go func() {
			out, err := ops.Run(ctx, rt, "ship it", &agent.RunOptions{RunID: id})
			done <- outcome{out, err}
		}()
		return done
	}
	waitListed := func(id string) result {
		t.Helper()
		var l result
		testwait.For(t, 15*time.Second, "calf approvals list to show "+id, func() bool {
			l = runMain(ctx, "", "approvals", "list", "--store", storeURL)
			return strings.Contains(l.stdout, id)
		})
		return l
	}

	done := start("r1")
	list := waitListed("r1/c1")
	if list.code != exitOK || !strings.Contains(list.stdout, "r1/c1  ops    deploy  execute  {\"env\":\"production\"}  pending") {
		t.Errorf("calf approvals list = %+v", list)
	}
	show := runMain(ctx, "", "approvals", "show", "--store", storeURL, "r1/c1")
	var shown approval.Approval
	if show.code != exitOK || json.Unmarshal([]byte(show.stdout), &shown) != nil || shown.Digest == "" || shown.Status != approval.Pending {
		t.Fatalf("calf approvals show = %+v", show)
	}
	// A digest other than the request's is refused.
	bad := runMain(ctx, "", "approvals", "approve", "--broker", brokerURL, "--store", storeURL, "--digest", "abc", "r1/c1")
	if bad.code != exitFailure || !strings.Contains(bad.stderr, "does not match") {
		t.Errorf("approve with another digest = %+v", bad)
	}
	ok := runMain(ctx, "", "approvals", "approve", "--broker", brokerURL, "--store", storeURL, "--digest", shown.Digest,
		"--arguments", `{"env":"staging"}`, "r1/c1")
	if ok.code != exitOK || ok.stdout != "approved r1/c1: deploy {\"env\":\"staging\"}\n" {
		t.Errorf("calf approvals approve = %+v", ok)
	}
	select {
	case o := <-done:
		if o.err != nil || o.out.Output != "deployed to staging" {
			t.Errorf("run r1: %+v, %v", o.out, o.err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("run r1 did not end after its approval")
	}
	again := runMain(ctx, "", "approvals", "deny", "--broker", brokerURL, "--store", storeURL, "r1/c1")
	if again.code != exitFailure || !strings.Contains(again.stderr, "answered already") {
		t.Errorf("a second answer = %+v", again)
	}

	done = start("r2")
	waitListed("r2/c1")
	no := runMain(ctx, "", "approvals", "deny", "--broker", brokerURL, "--store", storeURL, "--message", "not on a Friday", "r2/c1")
	if no.code != exitOK || !strings.HasPrefix(no.stdout, "denied r2/c1") {
		t.Errorf("calf approvals deny = %+v", no)
	}
	select {
	case o := <-done:
		if o.err != nil || !strings.Contains(o.out.Output, "not on a Friday") {
			t.Errorf("run r2: %+v, %v", o.out, o.err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("run r2 did not end after its denial")
	}
	if ran.Load() != "staging" {
		t.Errorf("the tool ran with %v", ran.Load())
	}
	// Only answered requests are left: the default list is empty, --all
	// shows both.
	if l := runMain(ctx, "", "approvals", "list", "--store", storeURL); strings.Count(l.stdout, "\n") != 1 {
		t.Errorf("pending after the answers:\n%s", l.stdout)
	}
	if l := runMain(ctx, "", "approvals", "list", "--all", "--store", storeURL); !strings.Contains(l.stdout, "approved") || !strings.Contains(l.stdout, "denied") {
		t.Errorf("calf approvals list --all:\n%s", l.stdout)
	}
	// Usage errors.
	for _, args := range [][]string{
		{"approvals", "approve", "--broker", "nats+embedded://" + t.TempDir(), "--store", storeURL, "r1/c1"},
		{"approvals", "approve", "--store", "memory:", "r1/c1"},
		{"approvals", "show", "--store", storeURL},
	} {
		if r := runMain(ctx, "", args...); r.code != exitUsage {
			t.Errorf("calf %s = %+v, want a usage error", strings.Join(args, " "), r)
		}
	}
	if r := runMain(ctx, "", "approvals", "show", "--store", storeURL, "nope/x"); r.code != exitFailure || !strings.Contains(r.stderr, "no such approval") {
		t.Errorf("show of an unknown id = %+v", r)
	}
}

// The request of a run that has ended is not listed as pending, shows as
// cancelled with --all, and approving it fails with a message that says
// the run has ended.
func TestApprovalsOfEndedRun(t *testing.T) {
	isolate(t)
	ctx := t.Context()
	storeURL := "sqlite:" + filepath.Join(t.TempDir(), "calf.db")
	brokerURL := kafkaBrokerURL(t)
	st, err := adapters.OpenStore(ctx, storeURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	b, err := adapters.OpenBroker(ctx, brokerURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	c := calf.NewClient(b, nil)
	defer c.Close()
	rt := agent.NewRuntime(c, st, nil)
	var ran atomic.Int64
	deploy := tool.Must(tool.New("deploy", "Deploy.", func(context.Context, struct{}) (string, error) {
		ran.Add(1)
		return "deployed", nil
	}))
	m := modeltest.FunctionModel(func(context.Context, *model.Request) (*model.Response, error) {
		return modeltest.ToolCalls(modeltest.Call("c1", "deploy", `{}`)), nil
	})
	ops := agent.Must(agent.New("ops", m, &agent.Options{
		Tools: []tool.Tool{deploy}, Permissions: &agent.Permissions{Mode: agent.PermissionAcceptEdits},
	}))
	if err := ops.Serve(ctx, rt, nil); err != nil {
		t.Fatal(err)
	}
	id, err := ops.Submit(ctx, rt, "ship it", &agent.RunOptions{RunID: "r3"})
	if err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 15*time.Second, "calf approvals list to show r3/c1", func() bool {
		return strings.Contains(runMain(ctx, "", "approvals", "list", "--store", storeURL).stdout, "r3/c1")
	})
	if _, err := rt.Cancel(ctx, agent.RunRef{Name: "ops", RunID: id}, "release called off"); err != nil {
		t.Fatal(err)
	}
	if l := runMain(ctx, "", "approvals", "list", "--store", storeURL); l.code != exitOK || strings.Contains(l.stdout, "r3/c1") {
		t.Errorf("calf approvals list after the run was cancelled = %+v", l)
	}
	if l := runMain(ctx, "", "approvals", "list", "--all", "--store", storeURL); !strings.Contains(l.stdout, "r3/c1") || !strings.Contains(l.stdout, "cancelled") {
		t.Errorf("calf approvals list --all:\n%s", l.stdout)
	}
	r := runMain(ctx, "", "approvals", "approve", "--broker", brokerURL, "--store", storeURL, "r3/c1")
	if r.code != exitFailure || !strings.Contains(r.stderr, "cannot be answered, its run has ended") || !strings.Contains(r.stderr, "release called off") {
		t.Errorf("calf approvals approve of an ended run's request = %+v", r)
	}
	if ran.Load() != 0 {
		t.Errorf("the tool ran %d times", ran.Load())
	}
}
