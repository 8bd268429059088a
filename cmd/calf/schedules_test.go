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
	"github.com/calf-go/calf/internal/testwait"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/schedule"
)

// calf schedules adds, lists, shows, pauses, resumes, triggers and
// removes a schedule; a trigger's run is carried out by a process that
// serves schedules and the agent, on the workers' broker.
func TestSchedulesCommands(t *testing.T) {
	isolate(t)
	ctx := t.Context()
	storeURL := "sqlite:" + filepath.Join(t.TempDir(), "calf.db")
	brokerURL := kafkaBrokerURL(t)

	if r := runMain(ctx, "", "schedules", "add", "--store", storeURL, "--agent", "digest", "--cron", "0 9 * * 1-5", "--tz", "Europe/Paris", "--prompt", "summarize", "morning"); r.code != exitOK || !strings.Contains(r.stdout, "added schedule morning: agent digest, next ") {
		t.Fatalf("add = %+v", r)
	}
	for _, bad := range [][]string{
		{"--agent", "digest", "--cron", "0 9 * *", "bad1"},
		{"--agent", "digest", "--team", "t", "--every", "1h", "bad2"},
		{"--agent", "digest", "--every", "1h", "--tz", "Europe/Paris", "bad3"},
	} {
		args := append([]string{"schedules", "add", "--store", storeURL}, bad...)
		if r := runMain(ctx, "", args...); r.code != exitUsage {
			t.Errorf("calf %q = %+v, want a usage error", args, r)
		}
	}
	if r := runMain(ctx, "", "schedules", "add", "--store", storeURL, "--agent", "digest", "--every", "1h", "morning"); r.code != exitFailure || !strings.Contains(r.stderr, "exists") {
		t.Errorf("add of a taken name = %+v", r)
	}
	l := runMain(ctx, "", "schedules", "list", "--store", storeURL)
	if l.code != exitOK || !strings.Contains(l.stdout, "morning") || !strings.Contains(l.stdout, "0 9 * * 1-5 (Europe/Paris)") {
		t.Errorf("list = %+v", l)
	}
	if r := runMain(ctx, "", "schedules", "pause", "--store", storeURL, "morning"); r.code != exitOK {
		t.Errorf("pause = %+v", r)
	}
	if l := runMain(ctx, "", "schedules", "list", "--store", storeURL); !strings.Contains(l.stdout, "paused") {
		t.Errorf("list after pause = %+v", l)
	}
	if r := runMain(ctx, "", "schedules", "resume", "--store", storeURL, "morning"); r.code != exitOK || !strings.Contains(r.stdout, "next") {
		t.Errorf("resume = %+v", r)
	}

	// A process serving the agent and the schedules, on the workers' broker.
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
	digest := agent.Must(agent.New("digest", modeltest.NewTestModel(modeltest.Text("the digest")), nil))
	if err := digest.Serve(ctx, rt, nil); err != nil {
		t.Fatal(err)
	}
	if err := schedule.New(rt, nil).Serve(ctx); err != nil {
		t.Fatal(err)
	}
	tr := runMain(ctx, "", "schedules", "trigger", "--store", storeURL, "--broker", brokerURL, "--idempotency-key", "k-1", "morning")
	if tr.code != exitOK || !strings.Contains(tr.stdout, "triggered schedule morning: run sched-morning-") {
		t.Fatalf("trigger = %+v", tr)
	}
	runID := strings.TrimSpace(tr.stdout[strings.Index(tr.stdout, "run ")+4:])
	testwait.For(t, 20*time.Second, "the triggered run to complete", func() bool {
		v, err := rt.LoadRun(ctx, agent.RunRef{Name: "digest", RunID: runID})
		return err == nil && v.RunStatus() == agent.RunComplete
	})
	// Sent again under its key, the trigger fires nothing more.
	if again := runMain(ctx, "", "schedules", "trigger", "--store", storeURL, "--broker", brokerURL, "--idempotency-key", "k-1", "morning"); again.stdout != tr.stdout {
		t.Errorf("the trigger sent again = %+v, want %q", again, tr.stdout)
	}
	sh := runMain(ctx, "", "schedules", "show", "--store", storeURL, "morning")
	var sc schedule.Schedule
	if err := json.Unmarshal([]byte(sh.stdout), &sc); err != nil || len(sc.History) != 1 || sc.History[0].RunID != runID || !sc.History[0].Trigger {
		t.Errorf("show = %+v (%v)", sh, err)
	}
	if r := runMain(ctx, "", "schedules", "trigger", "--store", storeURL, "morning"); r.code != exitUsage {
		t.Errorf("trigger without --broker = %+v", r)
	}
	if r := runMain(ctx, "", "schedules", "rm", "--store", storeURL, "morning"); r.code != exitOK {
		t.Errorf("rm = %+v", r)
	}
	if r := runMain(ctx, "", "schedules", "show", "--store", storeURL, "morning"); r.code != exitFailure {
		t.Errorf("show after rm = %+v", r)
	}
}

// A schedule in a prototypes file runs under calf worker --agents: the
// worker registers it, named after the prototype, and its firings start
// runs of the prototype's agent, which its model answers.
func TestWorkerRunsPrototypeSchedule(t *testing.T) {
	isolate(t)
	brokerURL := natsBrokerURL(t)
	storeURL := "sqlite:" + filepath.Join(t.TempDir(), "calf.db")
	var asked atomic.Int64
	srv := modeltest.NewServer(func(_ context.Context, req *model.Request) (*model.Response, error) {
		if req.Messages[len(req.Messages)-1].Text() == "what changed?" {
			asked.Add(1)
		}
		return modeltest.Text("nothing new"), nil
	})
	t.Cleanup(srv.Close)
	file := filepath.Join(t.TempDir(), "agents.yaml")
	writeFile(t, file, `prototypes:
  - name: watcher
    role: Watches
    model: `+srv.URL()+`#m
    system_prompt: You watch.
    schedule:
      every: 1s
      prompt: what changed?
`)
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	code, log := startWorker(t, ctx, "--broker", brokerURL, "--store", storeURL, "--agents", file)
	testwait.For(t, 30*time.Second, "two scheduled runs to reach the model", func() bool { return asked.Load() >= 2 })
	sh := runMain(t.Context(), "", "schedules", "show", "--store", storeURL, "watcher")
	var sc schedule.Schedule
	if err := json.Unmarshal([]byte(sh.stdout), &sc); err != nil || sc.Kind != "agent" || sc.Runner != "watcher" || sc.Every != time.Second {
		t.Errorf("show = %+v (%v)", sh, err)
	}
	stop()
	if c := <-code; c != exitOK {
		t.Errorf("worker exit %d; log:\n%s", c, log.String())
	}
	// A bad schedule in the file is refused at start, with the prototype named.
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	writeFile(t, bad, `prototypes:
  - name: watcher
    model: `+srv.URL()+`#m
    schedule:
      cron: "0 25 * * *"
      prompt: what changed?
`)
	r := runMain(t.Context(), "", "worker", "--broker", brokerURL, "--store", storeURL, "--agents", bad)
	if r.code != exitUsage || !strings.Contains(r.stderr, "prototype watcher") || !strings.Contains(r.stderr, "cron") {
		t.Errorf("a bad schedule = %+v", r)
	}
}
