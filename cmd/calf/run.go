package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/adapters"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/agent/approval"
	"github.com/calf-go/calf/eventlog"
)

// shutdownTimeout bounds the wait for handlers in progress when calf run
// ends.
const shutdownTimeout = 5 * time.Second

// runFlags are the flags of calf run.
type runFlags struct {
	agentFlags
	broker  string
	serve   bool
	store   string
	session string
	wait    bool
	json    bool
	quiet   bool
	record  bool
	// retention: see registerRetention.
	retention time.Duration
}

func newRunCommand(getenv func(string) string) *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "run [flags] PROMPT...",
		Short: "Run an agent once on a prompt and stream its answer",
		Long: `Run an agent once on a prompt and stream its answer.

By default the agent runs in this process, on an in-memory broker, with its
state in the store given by --store. With --broker naming a shared broker
(nats://, kafka://), the run is carried out by the calf worker processes
serving the agent there: this process only starts the run and follows its
events, and --store must name the workers' store. --serve makes this
process serve the agent as well. The words of PROMPT are joined with
spaces; a PROMPT of "-" is read from standard input.

The answer's text is streamed to standard output as it arrives; each tool
call and its result are shown on standard error. --json prints every event
of the run as a line of JSON instead, and --quiet only the final answer.
When standard error is a terminal and the run is quiet for a second (a slow
model, a long tool call), a line there says what it waits for and for how
long, and is erased when the next event comes.`,
		Example: `  calf run "What is 17 * 23?"
  calf run --model openai:gpt-4o "Summarize the theory of relativity in two sentences."
  calf run --model http://127.0.0.1:11434/v1#llama3.2 "Hello"
  calf run --read . "What does go.mod require?"
  calf run --agents agents.yaml --agent poet "Write about the sea."
  calf run --session trip "Plan a day in Lyon." && calf run --session trip "Make it rainy-day friendly."
  calf run --broker nats://127.0.0.1:4222 --store postgres://calf@db/calf "Hello, workers"`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageError(errors.New(`run needs a prompt: calf run "your question"`))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return runOnce(cmd.Context(), cmd, f, args, getenv, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	f.register(fl)
	f.registerAgents(fl, true)
	fl.StringVar(&f.store, "store", defaultStore, storeHelp)
	fl.StringVar(&f.broker, "broker", defaultBroker, brokerHelp)
	fl.BoolVar(&f.serve, "serve", false, "serve the agent in this process too, when --broker is shared with calf worker processes")
	fl.StringVar(&f.session, "session", "", "continue the conversation with this id, kept in the store (created if new)")
	fl.BoolVar(&f.wait, "wait", false, "wait for a calf worker to serve the agent, instead of failing when none does within a few seconds")
	fl.BoolVar(&f.json, "json", false, "print every event of the run as one line of JSON on standard output")
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "print only the final answer")
	fl.BoolVar(&f.record, "record", false, "record the run's events in the store (its event log), for calf trace")
	registerRetention(fl, &f.retention)
	cmd.MarkFlagsMutuallyExclusive("json", "quiet")
	return cmd
}

// runOnce is calf run: it checks the configuration, wires the runtime and
// streams one run.
func runOnce(ctx context.Context, cmd *cobra.Command, f runFlags, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
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
	if err := checkBroker(f.broker); err != nil {
		return err
	}
	if err := checkStore(f.store); err != nil {
		return err
	}
	if err := checkRetention(f.retention); err != nil {
		return err
	}
	serve, err := servesHere(cmd, f.serve, f.broker)
	if err != nil {
		return err
	}
	a, err := newAssistant(ctx, &f.agentFlags, getenv, serve)
	if err != nil {
		return err
	}

	st, err := openStore(ctx, f.store, nil)
	if err != nil {
		return err
	}
	defer st.Close()
	b, err := openBroker(ctx, f.broker, nil)
	if err != nil {
		return err
	}
	defer b.Close()

	var rt *agent.Runtime
	var runErr error
	if serve {
		// This process serves the agent: it keeps the store's runs to the
		// retention, as a worker does (a process that only starts runs
		// leaves that to the workers).
		w := agent.NewWorker(b, st, &agent.WorkerOptions{Client: &calf.Options{Name: calf.ProcessName()}, DrainTimeout: shutdownTimeout,
			Retention: f.retention, Runtime: runtimeOptions(ctx)})
		rt = w.Runtime()
		rt.AddSweeper("eventlog", eventlog.Sweep) // the logs --record keeps go with the runs
		if err := a.Serve(ctx, rt, nil); err != nil {
			return failure(err)
		}
		// The worker records dead letters and, when the run ends, drains.
		wctx, stop := context.WithCancel(context.WithoutCancel(ctx))
		ran := make(chan error, 1)
		go func() { ran <- w.Run(wctx) }()
		defer func() {
			if runErr != nil || ctx.Err() != nil {
				// The run was abandoned: what is still in progress belongs
				// to it, or goes back to the broker.
				w.Interrupt()
			}
			stop()
			<-ran
		}()
	} else {
		client := calf.NewClient(b, nil)
		defer func() {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
			defer cancel()
			_ = client.Shutdown(sctx)
		}()
		rt = agent.NewRuntime(client, st, runtimeOptions(ctx))
	}

	var events *eventlog.Log
	if f.record {
		events = eventlog.New(rt.Client(), st)
		if err := events.Record(ctx, nil); err != nil {
			return failure(err)
		}
	}

	records := func(runID string) ([]agent.ToolCallRecord, error) {
		st, err := rt.LoadAgentRun(ctx, runID)
		if err != nil {
			return nil, err
		}
		return st.ToolCalls, nil
	}
	hv := newHumanView(stdout, stderr, f.quiet, records)
	var v view = hv
	// On a terminal, a line shows that the run is alive while nothing
	// else does (a slow model, a long tool call).
	var p *pulse
	if f.json {
		v = newJSONView(stdout)
		p = &pulse{} // shows nothing
	} else {
		p = startPulse(stderr, func() bool { return !hv.midLine })
	}
	defer p.close()
	opts := &agent.RunOptions{SessionID: f.session}
	opts.WaitForWorkers = f.wait
	// Tool calls that wait for approval are asked about on standard input,
	// unless it carried the prompt or the output is JSON for a program.
	var answers *bufio.Reader
	if args[0] != "-" && !f.json {
		answers = bufio.NewReader(stdin)
	}
	var runID string
	for ev, err := range a.RunStream(ctx, rt, prompt, opts) {
		if err != nil {
			runErr = err
			break
		}
		if runID == "" {
			runID = ev.RunID
		}
		if ev.Kind == agent.EventApproval && ev.Approval.Status == approval.Pending {
			if err := p.do(nil, func() error { return askApproval(ctx, rt, ev.Approval, answers, stderr, f) }); err != nil {
				runErr = err
				break
			}
		}
		if err := p.do(&ev, func() error { return v.show(ev) }); err != nil {
			// Stopping the iteration cancels the run.
			runErr = fmt.Errorf("write the output: %w", err)
			break
		}
	}
	p.close()
	if err := v.close(); err != nil && runErr == nil {
		runErr = fmt.Errorf("write the output: %w", err)
	}
	if events != nil && runID != "" && ctx.Err() == nil {
		waitLogged(ctx, events, runID)
	}
	if errors.Is(runErr, agent.ErrNotServed) {
		// The agent's error names the Go option; this is the command line.
		runErr = fmt.Errorf("no calf worker serves the agent %s on %s (nothing took its input channel %s): "+
			"start one (calf worker --broker %s --store %s), add --wait to wait for one, or add --serve to serve it in this process",
			a.Name(), adapters.Redact(f.broker), agent.InputChannel(a.Name()), adapters.Redact(f.broker), adapters.Redact(f.store))
	}
	if err := promptTooLarge(runErr, a.Name()); err != nil {
		return err
	}
	return failure(runErr)
}

// promptTooLarge returns, for err refusing the input of agent's run as
// over the broker's size limit, a usage error that says the limit and what
// to do, and nil for any other error.
func promptTooLarge(err error, agentName string) error {
	var se *calf.SizeError
	if !errors.As(err, &se) || se.Channel != agent.InputChannel(agentName) {
		return nil
	}
	return usageError(fmt.Errorf("the prompt is too large: its message to the agent is %d bytes, over the broker's limit of %d bytes a message; "+
		"shorten it, or save the text in a file and give the agent the file tools (--read DIR) to read it from there", se.Size, se.Limit))
}

// askApproval asks on answers whether the call of req may run, and answers
// req. Without answers, or once they are exhausted, it says how to answer
// from another process, and the run waits: on memory://, that process
// records its answer in the store, where this one finds it. Where no other
// process can answer (memory:// with a memory: store, nats+embedded://),
// the call is denied.
func askApproval(ctx context.Context, rt *agent.Runtime, req *approval.Approval, answers *bufio.Reader, stderr io.Writer, f runFlags) error {
	fmt.Fprintf(stderr, "? %s %s needs approval (%s). Allow? [y/N] ", req.ToolName, oneLine(compactJSON(string(req.Arguments)), lineWidth), req.Reason)
	var line string
	var err error
	if answers != nil {
		line, err = answers.ReadString('\n')
	}
	if answers == nil || (err != nil && strings.TrimSpace(line) == "") {
		switch {
		case isMemory(f.broker) && !isMemory(f.store):
			// Another process answers in the store, where this one's
			// runtime reads the requests its runs wait for.
			store := ""
			if f.store != defaultStore {
				store = " --store " + adapters.Redact(f.store)
			}
			fmt.Fprintf(stderr, "\nwaiting: answer from another terminal with calf approvals approve (or deny)%s %s\n", store, req.ID)
			return nil
		case adapters.InProcess(f.broker):
			fmt.Fprintln(stderr, "no answer on standard input: denied")
			_, err := rt.Respond(ctx, req.ID, approval.Answer{Message: "no one was there to approve it", Digest: req.Digest})
			return err
		}
		fmt.Fprintf(stderr, "\nwaiting: answer with calf approvals approve (or deny) --store %s --broker %s %s\n",
			adapters.Redact(f.store), adapters.Redact(f.broker), req.ID)
		return nil
	}
	ans := approval.Answer{Digest: req.Digest, Message: "the user refused"}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		ans.Approve, ans.Message = true, ""
	}
	_, err = rt.Respond(ctx, req.ID, ans)
	return err
}

// waitLogged waits, a few seconds at most, until the log of run holds its
// output: the recorder of this process lags behind the run, and the
// process must not end before it has recorded the end.
func waitLogged(ctx context.Context, events *eventlog.Log, run string) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for _, err := range events.FollowRun(ctx, run, 0) {
		if err != nil {
			return
		}
	}
}

// servesHere reports whether this process serves the agent: asked to
// (--serve), or on an in-process broker, which reaches no worker. A
// process that does not serve refuses the flags that configure the agent.
func servesHere(cmd *cobra.Command, serve bool, broker string) (bool, error) {
	if serve || adapters.InProcess(broker) {
		return true, nil
	}
	for _, name := range agentFlagNames {
		if cmd.Flags().Changed(name) {
			return false, usageError(fmt.Errorf("--%s configures the agent, which the calf worker processes on %s serve: "+
				"give it to calf worker, or add --serve to serve the agent here too", name, adapters.Redact(broker)))
		}
	}
	return false, nil
}
