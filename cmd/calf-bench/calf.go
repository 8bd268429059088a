package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/model/openai"
	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/tool"
)

// Stores -store accepts.
const (
	storeMemory = "memory"
	storeSQLite = "sqlite"
)

// calfStack is W1's agent served on a fresh broker and store.
type calfStack struct {
	broker *memory.Broker
	client *calf.Client
	store  store.Store
	rt     *agent.Runtime
	agent  *agent.Agent[string]
}

// noLocalSuffix marks the systems of -no-local: calf/STORE with the
// in-process broker hidden behind a wrapper that does not say it is local
// (calf.IsLocal), so that the runtime takes the path of a shared broker:
// no cached run state, every step read from the store.
const noLocalSuffix = "/nolocal"

// notLocal hides that the broker it wraps is local.
type notLocal struct{ calf.Broker }

// newCalfStack serves W1's agent on the in-process broker and the store
// named kind (a SQLite file goes in dir), calling the mock at base through
// model/openai without retries, each of its handlers on up to
// serveConcurrency runs at once (0: the broker's default). With remote,
// the runtime does not know the broker is local (see noLocalSuffix).
func newCalfStack(ctx context.Context, kind, dir string, httpClient *http.Client, base string, serveConcurrency int, remote bool) (*calfStack, error) {
	st, err := openStore(kind, dir)
	if err != nil {
		return nil, err
	}
	a, err := newW1Agent(httpClient, base)
	if err != nil {
		_ = closeStore(st)
		return nil, err
	}
	b := memory.New(nil)
	var cb calf.Broker = b
	if remote {
		cb = notLocal{b}
	}
	client := calf.NewClient(cb, nil)
	s := &calfStack{broker: b, client: client, store: st, rt: agent.NewRuntime(client, st, nil), agent: a}
	if err := a.Serve(ctx, s.rt, serveOptions(serveConcurrency)); err != nil {
		_ = s.close()
		return nil, err
	}
	return s, nil
}

// serveOptions bounds each handler of W1's agent to concurrency runs at
// once; 0 leaves the broker's default (nil options).
func serveOptions(concurrency int) *agent.ServeOptions {
	if concurrency <= 0 {
		return nil
	}
	return &agent.ServeOptions{Concurrency: concurrency}
}

// run does one W1 run through agent.Run and checks its output, its tool
// call and its number of model calls.
func (s *calfStack) run(ctx context.Context) error {
	return runW1(ctx, s.agent, s.rt)
}

// newW1Agent returns W1's agent, calling the mock at base through
// model/openai without retries.
func newW1Agent(httpClient *http.Client, base string) (*agent.Agent[string], error) {
	m, add, err := w1ModelAndTool(httpClient, base)
	if err != nil {
		return nil, err
	}
	return agent.New(agentName, m, &agent.Options{
		Instructions: instructions,
		Tools:        []tool.Tool{add},
	})
}

// w1ModelAndTool returns W1's model, the mock at base through
// model/openai without retries, and its add tool.
func w1ModelAndTool(httpClient *http.Client, base string) (*openai.Model, tool.Tool, error) {
	m, err := openai.New(openai.Options{Model: modelName, BaseURL: base, APIKey: apiKey, HTTPClient: httpClient, MaxRetries: -1})
	if err != nil {
		return nil, nil, err
	}
	add, err := tool.New(toolName, toolDesc, func(_ context.Context, in operands) (int, error) {
		return in.A + in.B, nil
	})
	if err != nil {
		return nil, nil, err
	}
	return m, add, nil
}

// runW1 does one W1 run of a through agent.Run on rt and checks its
// output, its tool call and its number of model calls.
func runW1(ctx context.Context, a *agent.Agent[string], rt *agent.Runtime) error {
	out, err := a.Run(ctx, rt, prompt, nil)
	if err != nil {
		return err
	}
	if len(out.ToolCalls) != 1 || out.Steps != 2 || out.ToolCalls[0].Name != toolName ||
		out.ToolCalls[0].Result == nil || out.ToolCalls[0].Result.Text() != "5" {
		return fmt.Errorf("%w: want one call of %s that returned 5 and two model calls, got %d calls and %d model calls",
			errWrongOutput, toolName, len(out.ToolCalls), out.Steps)
	}
	return checkOutput(out.Output)
}

func (s *calfStack) close() error {
	err := s.client.Close()
	if berr := s.broker.Close(); err == nil {
		err = berr
	}
	if serr := closeStore(s.store); err == nil {
		err = serr
	}
	return err
}

func closeStore(st store.Store) error {
	if c, ok := st.(interface{ Close() error }); ok {
		return c.Close()
	}
	return nil
}

// sqliteDir makes the directory the SQLite files of one benchmark go in.
func sqliteDir() (string, func(), error) {
	dir, err := os.MkdirTemp("", "calf-bench-")
	if err != nil {
		return "", nil, err
	}
	return filepath.Clean(dir), func() { _ = os.RemoveAll(dir) }, nil
}
