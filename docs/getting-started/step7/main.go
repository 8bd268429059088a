// Step 7 of docs/getting-started.md: the agent on workers that share NATS
// JetStream and PostgreSQL, and a caller in another process.
//
//	OPENAI_API_KEY=... go run ./docs/getting-started/step7 worker    # in two terminals or more
//	OPENAI_API_KEY=... go run ./docs/getting-started/step7 ask "What is 2 + 3?"
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/adapters"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/models"
	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/tool"
)

func main() {
	spec := flag.String("model", "openai:gpt-4o-mini", "the model: openai:NAME, anthropic:NAME, gemini:NAME, ollama:NAME or URL#NAME")
	brokerURL := flag.String("broker", "nats://127.0.0.1:4222", "the broker every process shares")
	storeURL := flag.String("store", "postgres://127.0.0.1:5432/test", "the store every process shares")
	flag.Parse()
	if err := open(*spec, *brokerURL, *storeURL, flag.Args()); err != nil {
		log.Fatal(err)
	}
}

// open opens the model, the broker and the store, and runs the command:
// worker or ask.
func open(spec, brokerURL, storeURL string, args []string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	m, err := models.Open(spec, nil)
	if err != nil {
		return err
	}
	b, err := adapters.OpenBroker(ctx, brokerURL, nil)
	if err != nil {
		return err
	}
	defer b.Close()
	st, err := adapters.OpenStore(ctx, storeURL, nil)
	if err != nil {
		return err
	}
	defer st.Close()
	switch {
	case len(args) == 1 && args[0] == "worker":
		w, err := newWorker(ctx, m, b, st)
		if err != nil {
			return err
		}
		// Until Ctrl-C or SIGTERM; then the handlers in progress finish,
		// and the messages not taken go to the other workers.
		return w.Run(ctx)
	case len(args) > 1 && args[0] == "ask":
		return ask(ctx, m, b, st, strings.Join(args[1:], " "), os.Stdout)
	}
	return errors.New("usage: step7 [flags] worker | ask QUESTION")
}

type operands struct {
	A float64 `json:"a"`
	B float64 `json:"b"`
}

// newAgent is the agent both sides define: workers run it, callers use
// its name and output type (their model is not called).
func newAgent(m model.Model) (*agent.Agent[string], error) {
	add := tool.Must(tool.New("add", "Add two numbers.", func(ctx context.Context, in operands) (float64, error) {
		return in.A + in.B, nil
	}))
	return agent.New("calculator", m, &agent.Options{
		Instructions: "Use the add tool for every sum. Answer briefly.",
		Tools:        []tool.Tool{add},
	})
}

// newWorker makes a worker and serves the agent on it: once it returns,
// the worker takes the agent's messages.
func newWorker(ctx context.Context, m model.Model, b calf.Broker, st store.Store) (*agent.Worker, error) {
	w := agent.NewWorker(b, st, nil)
	a, err := newAgent(m)
	if err != nil {
		return nil, err
	}
	if err := a.Serve(ctx, w.Runtime(), nil); err != nil {
		return nil, err
	}
	return w, nil
}

// ask runs the agent on whichever worker takes the run, and prints its
// answer.
func ask(ctx context.Context, m model.Model, b calf.Broker, st store.Store, question string, w io.Writer) error {
	client := calf.NewClient(b, nil)
	defer client.Close()
	rt := agent.NewRuntime(client, st, nil)
	a, err := newAgent(m)
	if err != nil {
		return err
	}
	out, err := a.Run(ctx, rt, question, nil)
	if err != nil {
		return err
	}
	fmt.Fprintln(w, out.Output)
	return nil
}
