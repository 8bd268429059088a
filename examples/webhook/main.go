// Command webhook is a workflow that waits for a webhook: a writer agent
// drafts release notes, then the run waits, holding no goroutine, for
// the signal "approval" that an HTTP endpoint of the program sends when
// someone (a CI system, a chat bot, curl) calls it; approved, the notes
// are published, refused or unanswered within -timeout, they are not.
//
//	OPENAI_API_KEY=... go run ./examples/webhook "Calf 0.9: durable timers, schedules and signals"
//
// and, in another terminal, with the run id the program prints:
//
//	curl -X POST http://127.0.0.1:8089/hooks/approval/RUN -d '{"approved": true, "by": "ada"}'
//
// The same signal goes through calf runs signal, or POST
// /v1/runs/{id}/signals/approval on calf serve. Any OpenAI-compatible
// server works: set OPENAI_BASE_URL and pass -model.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/examples/internal/excli"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/store"
	storemem "github.com/calf-go/calf/store/memory"
	"github.com/calf-go/calf/workflow"
)

// Release is the workflow's state.
type Release struct {
	Topic     string `json:"topic"`
	Notes     string `json:"notes"`
	Approved  bool   `json:"approved"`
	By        string `json:"by,omitempty"`
	Published bool   `json:"published"`
}

// Approval is the value of the signal "approval".
type Approval struct {
	Approved bool   `json:"approved"`
	By       string `json:"by"`
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8089", "where the webhook listens (loopback)")
	timeout := flag.Duration("timeout", 10*time.Minute, "how long the run waits for the approval")
	excli.Main("webhook", "Calf 0.9: durable timers, schedules and signals", func(ctx context.Context, m model.Model, topic string) (string, error) {
		ln, err := net.Listen("tcp", *addr)
		if err != nil {
			return "", err
		}
		final, err := run(ctx, m, topic, *timeout, ln, os.Stdout)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("published: %v (approved: %v, by %q)\n%s", final.Published, final.Approved, final.By, final.Notes), nil
	})
}

// newWorkflow drafts the notes, waits for the approval (at most
// timeout), and publishes them when approved.
func newWorkflow(writer *agent.Agent[string], timeout time.Duration) (*workflow.Workflow[Release], error) {
	return workflow.New[Release]("release", nil).
		Node("draft", workflow.AgentNode(writer,
			func(s Release) (string, error) { return "Write short release notes for: " + s.Topic, nil },
			func(s Release, out string) (Release, error) { s.Notes = out; return s, nil })).
		Node("approval", workflow.Func(func(ctx context.Context, s Release) (Release, error) {
			var a Approval
			ok, err := workflow.WaitSignal(ctx, "approval", timeout, &a)
			if err != nil {
				return s, err // the run waits; the signal, or the timeout, runs the node again
			}
			s.Approved, s.By = ok && a.Approved, a.By
			return s, nil
		})).
		Node("publish", workflow.Func(func(_ context.Context, s Release) (Release, error) {
			s.Published = s.Approved
			return s, nil
		})).
		Edge(workflow.Start, "draft").Edge("draft", "approval").Edge("approval", "publish").Edge("publish", workflow.End).
		Build()
}

// webhook is the HTTP endpoint POST /hooks/approval/{run}: its body, an
// Approval, is sent to the run as the signal "approval".
func webhook(rt *agent.Runtime) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /hooks/approval/{run}", func(w http.ResponseWriter, r *http.Request) {
		var a Approval
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&a); err != nil {
			http.Error(w, "the body is an approval: {\"approved\": true, \"by\": \"name\"}", http.StatusBadRequest)
			return
		}
		ref := agent.RunRef{Kind: "workflow", Name: "release", RunID: r.PathValue("run")}
		switch _, err := rt.Signal(r.Context(), ref, "approval", a); {
		case errors.Is(err, store.ErrNotFound):
			http.Error(w, "no such run", http.StatusNotFound)
			return
		case err != nil:
			http.Error(w, err.Error(), http.StatusConflict)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	})
	return mux
}

// run starts a release run for topic, serves the webhook on ln, and
// returns the run's final state.
func run(ctx context.Context, m model.Model, topic string, timeout time.Duration, ln net.Listener, w io.Writer) (Release, error) {
	b := memory.New(nil)
	defer b.Close()
	client := calf.NewClient(b, nil)
	defer client.Close()
	rt := agent.NewRuntime(client, storemem.New(), nil)
	writer, err := agent.New("writer", m, &agent.Options{Instructions: "You write release notes: three short bullet points."})
	if err != nil {
		return Release{}, err
	}
	wf, err := newWorkflow(writer, timeout)
	if err != nil {
		return Release{}, err
	}
	if err := writer.Serve(ctx, rt, nil); err != nil {
		return Release{}, err
	}
	if err := wf.Serve(ctx, rt, nil); err != nil {
		return Release{}, err
	}
	srv := &http.Server{Handler: webhook(rt), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	id, err := wf.Submit(ctx, rt, Release{Topic: topic}, nil)
	if err != nil {
		return Release{}, err
	}
	// Tell how to approve once the run waits for it (after the draft).
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		info, err := wf.LoadRun(ctx, rt, id)
		if err == nil && (info.WaitingFor == "approval" || info.Status.Terminal()) {
			break
		}
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return Release{}, err
		}
		select {
		case <-ctx.Done():
			return Release{}, ctx.Err()
		case <-tick.C:
		}
	}
	fmt.Fprintf(w, "run %s waits for its approval:\n  curl -X POST http://%s/hooks/approval/%s -d '{\"approved\": true, \"by\": \"you\"}'\n", id, ln.Addr(), id)
	return wf.Wait(ctx, rt, id)
}
