package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/tool"
	"github.com/calf-go/calf/tool/builtin"
)

// defaultInstructions is the --system default.
const defaultInstructions = "You are a helpful assistant. Answer clearly and concisely."

// agentName is the name of the agent calf run runs.
const agentName = "assistant"

// shutdownTimeout bounds the wait for handlers in progress when calf run
// ends.
const shutdownTimeout = 5 * time.Second

// runFlags are the flags of calf run.
type runFlags struct {
	model    string
	store    string
	system   string
	session  string
	timeout  time.Duration
	maxTurns int
	read     string
	json     bool
	quiet    bool
}

func newRunCommand(getenv func(string) string) *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "run [flags] PROMPT...",
		Short: "Run an agent once on a prompt and stream its answer",
		Long: `Run an agent once on a prompt and stream its answer.

The agent runs in this process, on an in-memory broker, with its state in
the store given by --store. The words of PROMPT are joined with spaces; a
PROMPT of "-" is read from standard input.

The answer's text is streamed to standard output as it arrives; each tool
call and its result are shown on standard error. --json prints every event
of the run as a line of JSON instead, and --quiet only the final answer.`,
		Example: `  calf run "What is 17 * 23?"
  calf run --model openai:gpt-4o "Summarize the theory of relativity in two sentences."
  calf run --model http://127.0.0.1:11434/v1#llama3.2 "Hello"
  calf run --read . "What does go.mod require?"
  calf run --session trip "Plan a day in Lyon." && calf run --session trip "Make it rainy-day friendly."`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageError(errors.New(`run needs a prompt: calf run "your question"`))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return runOnce(cmd.Context(), f, args, getenv, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.model, "model", "", "the model: openai:NAME, a bare NAME, or the base URL of an OpenAI-compatible server "+
		"with an optional #NAME (default $"+envModel+", else "+defaultModel+")")
	fl.StringVar(&f.store, "store", defaultStore, "where state lives: sqlite:PATH (empty PATH: the default file) or memory:")
	fl.StringVar(&f.system, "system", defaultInstructions, "the agent's instructions (system prompt)")
	fl.StringVar(&f.session, "session", "", "continue the conversation with this id, kept in the store (created if new)")
	fl.DurationVar(&f.timeout, "timeout", agent.DefaultTimeout, "bound on the whole run")
	fl.IntVar(&f.maxTurns, "max-turns", agent.DefaultMaxTurns, "bound on the model calls of the run")
	fl.StringVar(&f.read, "read", "", "give the agent read-only file tools (read_file, list_dir, glob, grep) confined to `DIR`")
	fl.BoolVar(&f.json, "json", false, "print every event of the run as one line of JSON on standard output")
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "print only the final answer")
	cmd.MarkFlagsMutuallyExclusive("json", "quiet")
	return cmd
}

// runOnce is calf run: it checks the configuration, wires the embedded
// runtime and streams one run.
func runOnce(ctx context.Context, f runFlags, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	prompt := strings.Join(args, " ")
	if prompt == "-" {
		b, err := io.ReadAll(stdin)
		if err != nil {
			return failure(fmt.Errorf("read the prompt from standard input: %w", err))
		}
		prompt = string(b)
	}
	if strings.TrimSpace(prompt) == "" {
		return usageError(errors.New("the prompt is empty"))
	}
	if f.timeout <= 0 {
		return usageError(fmt.Errorf("--timeout must be positive, got %s", f.timeout))
	}
	if f.maxTurns <= 0 {
		return usageError(fmt.Errorf("--max-turns must be positive, got %d", f.maxTurns))
	}
	openStore, err := storeOpener(f.store)
	if err != nil {
		return err
	}
	var tools []tool.Tool
	if f.read != "" {
		if tools, err = builtin.ReadOnly(f.read); err != nil {
			return usageError(fmt.Errorf("--read: %w", err))
		}
	}
	choice, err := selectModel(ctx, f.model, getenv, http.DefaultClient)
	if err != nil {
		return failure(err)
	}
	m, err := newModel(choice)
	if err != nil {
		return err
	}
	a, err := agent.New[agent.NoDeps, string](agentName, m, &agent.Options[agent.NoDeps]{
		Instructions: f.system,
		Tools:        tools,
		MaxTurns:     f.maxTurns,
		Timeout:      f.timeout,
	})
	if err != nil {
		return failure(err)
	}

	st, err := openStore()
	if err != nil {
		return failure(err)
	}
	defer st.Close()
	b := memory.New(nil)
	defer b.Close()
	client := calf.NewClient(b, nil)
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
		defer cancel()
		_ = client.Shutdown(sctx)
	}()
	rt := agent.NewRuntime(client, st, nil)
	if err := a.Serve(ctx, rt, nil); err != nil {
		return failure(err)
	}

	records := func(runID string) ([]agent.ToolCallRecord, error) {
		st, err := rt.LoadRun(ctx, runID)
		if err != nil {
			return nil, err
		}
		return st.ToolCalls, nil
	}
	var v view = newHumanView(stdout, stderr, f.quiet, records)
	if f.json {
		v = newJSONView(stdout)
	}
	var runErr error
	for ev, err := range a.RunStream(ctx, rt, prompt, &agent.RunOptions[agent.NoDeps]{SessionID: f.session}) {
		if err != nil {
			runErr = err
			break
		}
		if err := v.show(ev); err != nil {
			// Stopping the iteration cancels the run.
			runErr = fmt.Errorf("write the output: %w", err)
			break
		}
	}
	if err := v.close(); err != nil && runErr == nil {
		runErr = fmt.Errorf("write the output: %w", err)
	}
	return failure(runErr)
}
