package e2e

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	spec "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"

	"github.com/calf-go/calf/internal/testwait"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
)

// An A2A task survives a kill -9 of the process that serves it: its run
// goes on in a calf worker on NATS+PostgreSQL, and calf a2a serve started
// again reports the task completed, with its answer.
func TestA2ATaskAcrossKillNATSPostgres(t *testing.T) {
	h := newHarness(t)
	cfg := h.config(natsPostgres)
	calfBin := buildCalf(t)
	started, release := make(chan struct{}, 1), make(chan struct{})
	fake := modeltest.NewServer(func(ctx context.Context, req *model.Request) (*model.Response, error) {
		p := req.Messages[len(req.Messages)-1].Text()
		if p == "a slow task" {
			select {
			case started <- struct{}{}:
			default:
			}
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return modeltest.Text("finished: " + p), nil
	})
	defer fake.Close()
	brokerURL := cfg.BrokerURL + "?stream=E2E_" + cfg.Namespace + "&prefix=e2e" + cfg.Namespace
	start := func(args ...string) *exec.Cmd {
		t.Helper()
		cmd := exec.Command(calfBin, args...)
		out := &syncBuffer{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			if t.Failed() {
				t.Logf("calf %s:\n%s", args[0], out.String())
			}
		})
		return cmd
	}
	worker := start("worker", "--broker", brokerURL, "--store", cfg.StoreURL, "--model", fake.URL()+"#m")
	testwait.For(t, waitTimeout, "calf worker to start serving", func() bool {
		return strings.Contains(worker.Stdout.(*syncBuffer).String(), "serving")
	})
	var servers []*exec.Cmd
	serve := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		cmd := start("a2a", "serve", "--broker", brokerURL, "--store", cfg.StoreURL, "--addr", addr)
		testwait.ForErr(t, waitTimeout, "calf a2a serve to listen", func() error {
			c, err := net.Dial("tcp", addr)
			if err == nil {
				c.Close()
			}
			return err
		})
		servers = append(servers, cmd)
		return "http://" + addr
	}
	first := serve()
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	client := func(url string) *a2aclient.Client {
		c, err := a2aclient.NewFromEndpoints(ctx, []*spec.AgentInterface{spec.NewAgentInterface(url, spec.TransportProtocolJSONRPC)})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c1 := client(first)
	res, err := c1.SendMessage(ctx, &spec.SendMessageRequest{
		Message: spec.NewMessage(spec.MessageRoleUser, spec.NewTextPart("a slow task")),
		Config:  &spec.SendMessageConfig{ReturnImmediately: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	task := res.(*spec.Task)
	select {
	case <-started:
	case <-time.After(waitTimeout / 2):
		now, err := c1.GetTask(ctx, &spec.GetTaskRequest{ID: task.ID})
		t.Fatalf("the task's run did not reach the model: task %+v, %v", now, err)
	}
	if err := servers[0].Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = servers[0].Wait()
	close(release)

	c2 := client(serve())
	var got *spec.Task
	testwait.ForErr(t, waitTimeout, "task "+string(task.ID)+" to end after the restart", func() error {
		got, err = c2.GetTask(ctx, &spec.GetTaskRequest{ID: task.ID})
		if err == nil && !got.Status.State.Terminal() {
			err = fmt.Errorf("task %+v", got)
		}
		return err
	})
	var text strings.Builder
	for _, a := range got.Artifacts {
		for _, p := range a.Parts {
			text.WriteString(p.Text())
		}
	}
	if got.Status.State != spec.TaskStateCompleted || text.String() != "finished: a slow task" {
		t.Errorf("task %s: %s, %q", task.ID, got.Status.State, text.String())
	}
	t.Logf("task %s completed across the kill: %q", task.ID, text.String())
}

// syncBuffer is a buffer that a process writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
