package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/adapters"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/runner"
	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/team"
	"github.com/calf-go/calf/workflow"
)

func newRunsCommand() *cobra.Command {
	var storeURL, brokerURL string
	cmd := &cobra.Command{
		Use:   "runs",
		Short: "List, show, pause, resume, cancel and signal agent, team and workflow runs",
		Long: `List, show, pause, resume, cancel and signal agent, team and workflow runs.

The commands read the runs in the workers' store. pause, resume and cancel
change a run's state and publish what follows on the workers' broker,
where whichever worker serves the run carries on: a paused run finishes
the step in progress and then waits, holding nothing, until it is resumed.
A workflow run's cancel is a request that a worker serving the workflow
carries out, cancelling the child runs in progress with the run.`,
		Args: noArgs,
	}
	cmd.PersistentFlags().StringVar(&storeURL, "store", defaultStore, storeHelp+"; the workers' store")

	var status, agentName string
	var limit int
	var asJSON bool
	list := &cobra.Command{
		Use:   "list",
		Short: "List the newest runs (reads every run record of the store)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return listRuns(cmd.Context(), storeURL, runFilter{status: status, agent: agentName, limit: limit}, asJSON, cmd.OutOrStdout())
		},
	}
	list.Flags().StringVar(&status, "status", "", "only the runs with this status: running, paused, pausing, interrupted (workflows), complete, failed, cancelled, handed_off")
	list.Flags().StringVar(&agentName, "agent", "", "only the runs of this agent, team or workflow")
	list.Flags().IntVar(&limit, "limit", 20, "at most this many runs, the newest first")
	list.Flags().BoolVar(&asJSON, "json", false, "print each run as one line of JSON")

	show := &cobra.Command{
		Use:   "show ID",
		Short: "Print a run's stored state, as JSON, with its whole conversation",
		Args:  oneRunID,
		RunE: func(cmd *cobra.Command, args []string) error {
			return showRun(cmd.Context(), storeURL, args[0], cmd.OutOrStdout())
		},
	}
	var reason string
	act := func(what string) func(*cobra.Command, []string) error {
		return func(cmd *cobra.Command, args []string) error {
			return actOnRun(cmd.Context(), storeURL, brokerURL, what, args[0], reason, nil, cmd.OutOrStdout())
		}
	}
	var (
		asText  bool
		idemKey string
	)
	signal := &cobra.Command{
		Use:   "signal ID NAME [VALUE]",
		Short: "Send a signal, a named value, to a run",
		Long: `Send a signal, a named value, to a run of an agent, a team or a workflow.

The run's code waits for signals by name (workflow.WaitSignal in a
workflow's node, StepContext.WaitSignal in a custom agent's step); a
signal sent before the run waits is kept until it does. VALUE is JSON
(quote a string: '"yes"'), or text with --text; without it the signal
has no value. A run that has ended, or no run of that id, is an error.
With --idempotency-key, the same signal sent again under the key (within
the runtime's idempotency window, 24 hours) is delivered once; another
signal under the key is refused.

With --broker, the workers' broker, the signal wakes the run at once.
Without it (or with memory://), the signal is only recorded in --store:
the process that serves the run on a broker of its own (calf run, chat,
serve, or a calf worker on memory://) finds it there within a second or
two and wakes the run.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 2 || len(args) > 3 {
				return usageError(fmt.Errorf("calf runs signal takes a run id, a signal name and an optional value; got %d arguments", len(args)))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			sig := &signalArgs{name: args[1], key: idemKey}
			if len(args) == 3 {
				switch {
				case asText:
					b, _ := json.Marshal(args[2])
					sig.value = b
				case json.Valid([]byte(args[2])):
					sig.value = json.RawMessage(args[2])
				default:
					return usageError(fmt.Errorf("the value %q is not JSON: quote a string ('\"%s\"') or give --text", oneLine(args[2], 40), oneLine(args[2], 40)))
				}
			}
			return actOnRun(cmd.Context(), storeURL, brokerURL, "signal", args[0], "", sig, cmd.OutOrStdout())
		},
	}
	signal.Flags().BoolVar(&asText, "text", false, "send VALUE as text (a JSON string)")
	signal.Flags().StringVar(&idemKey, "idempotency-key", "", "the caller's key: the same signal sent again under it is delivered once")
	pause := &cobra.Command{Use: "pause ID", Short: "Pause a run before its next step", Args: oneRunID, RunE: act("pause")}
	resume := &cobra.Command{Use: "resume ID", Short: "Resume a paused run", Args: oneRunID, RunE: act("resume")}
	cancel := &cobra.Command{Use: "cancel ID", Short: "Cancel a run", Args: oneRunID, RunE: act("cancel")}
	for _, c := range []*cobra.Command{pause, resume, cancel} {
		c.Flags().StringVar(&brokerURL, "broker", "", brokerHelp+" (required: the workers' broker)")
	}
	signal.Flags().StringVar(&brokerURL, "broker", "", brokerHelp+"; the workers' broker. Default: none, the signal is only recorded in --store, "+
		"where the process serving the run on memory:// (calf run, chat, serve) finds it")
	for _, c := range []*cobra.Command{pause, cancel} {
		c.Flags().StringVar(&reason, "reason", "", "why, recorded with the run")
	}
	cmd.AddCommand(list, show, pause, resume, cancel, signal)
	return cmd
}

// oneRunID accepts exactly one argument, the id of a run.
var oneRunID = oneIDOf("run id", "calf runs list")

// runSummary is a line of calf runs list.
type runSummary = runner.RunSummary

type runFilter struct {
	status, agent string
	limit         int
}

func listRuns(ctx context.Context, storeURL string, f runFilter, asJSON bool, out io.Writer) error {
	if f.limit <= 0 {
		return usageError(fmt.Errorf("--limit must be positive, got %d", f.limit))
	}
	if f.status != "" && !slices.Contains(runner.Statuses, f.status) {
		return usageError(fmt.Errorf("--status %q: use running, paused, pausing, interrupted, complete, failed, cancelled or handed_off", f.status))
	}
	st, err := openStore(ctx, storeURL, nil)
	if err != nil {
		return err
	}
	defer st.Close()
	runs, err := runner.Runs(ctx, st, &runner.RunFilter{Status: f.status, Name: f.agent, Limit: f.limit})
	if err != nil {
		return failure(err)
	}
	if asJSON {
		return failure(jsonLines(out, runs))
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tKIND\tNAME\tSTATUS\tSTEP\tSTARTED\tSESSION\tPROMPT\tREASON")
	for _, r := range runs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", r.ID, r.Kind, r.Name, r.Status, r.Step,
			r.Started.UTC().Format(time.RFC3339), cmp.Or(r.Session, "-"), cmp.Or(oneLine(r.Prompt, 40), "-"), oneLine(r.Reason, 60))
	}
	return failure(tw.Flush())
}

func showRun(ctx context.Context, storeURL, id string, out io.Writer) error {
	st, err := openStore(ctx, storeURL, nil)
	if err != nil {
		return err
	}
	defer st.Close()
	run, err := loadRun(ctx, st, id)
	if err != nil {
		return failure(err)
	}
	v := run.View()
	if rs := run.Agent; rs != nil && rs.Partial {
		// The record holds the run's last messages: read back the history
		// its session keeps and the messages archived, and print them all.
		mb := memory.New(nil)
		defer mb.Close()
		c := calf.NewClient(mb, nil)
		defer c.Close()
		if v, err = agent.NewRuntime(c, st, nil).LoadAgentRun(ctx, id); err != nil {
			return failure(err)
		}
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return failure(err)
	}
	_, err = fmt.Fprintf(out, "%s\n", b)
	return failure(err)
}

// loadRun is runner.LoadRun, whose error for a run the store does not
// hold says so in the user's words, not the store's.
func loadRun(ctx context.Context, st store.Store, id string) (*runner.Run, error) {
	run, err := runner.LoadRun(ctx, st, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("no such run: %s (no agent, team or workflow run has this id)", id)
	}
	return run, err
}

// signalArgs are the signal of calf runs signal.
type signalArgs struct {
	name  string
	value json.RawMessage
	// key is the caller's idempotency key, or none.
	key string
}

func actOnRun(ctx context.Context, storeURL, brokerURL, what, id, reason string, sig *signalArgs, out io.Writer) error {
	// A signal can be only recorded: the process serving the run on a
	// broker of its own finds it in the store (a pause, a resume or a
	// cancel needs the workers' broker).
	recordOnly := what == "signal" && (brokerURL == "" || adapters.InProcess(brokerURL))
	switch {
	case recordOnly:
		brokerURL = defaultBroker
	case brokerURL == "":
		return usageError(fmt.Errorf("calf runs %s needs --broker: the workers' broker, such as nats://127.0.0.1:4222", what))
	default:
		if err := checkBroker(brokerURL); err != nil {
			return err
		}
		if adapters.InProcess(brokerURL) {
			return usageError(fmt.Errorf("--broker %s: no worker is reachable there; give the workers' broker", adapters.Redact(brokerURL)))
		}
	}
	st, err := openStore(ctx, storeURL, nil)
	if err != nil {
		return err
	}
	defer st.Close()
	// Find the run before connecting to the broker.
	run, err := loadRun(ctx, st, id)
	if err != nil {
		return failure(err)
	}
	b, err := openBroker(ctx, brokerURL, nil)
	if err != nil {
		return err
	}
	defer b.Close()
	c := calf.NewClient(b, nil)
	defer c.Close()
	rt := agent.NewRuntime(c, st, nil)
	if reason == "" {
		reason = "asked by calf runs " + what
	}
	rt.AddKind(team.Kind, workflow.Kind)
	ref := run.View().Ref()
	var v agent.RunView
	switch what {
	case "pause":
		v, err = rt.Pause(ctx, ref, reason)
	case "resume":
		v, err = rt.Resume(ctx, ref)
	case "signal":
		var value any
		if sig.value != nil {
			value = sig.value
		}
		v, err = rt.SignalWith(ctx, ref, sig.name, value, &agent.SignalOptions{IdempotencyKey: sig.key})
	default:
		v, err = rt.Cancel(ctx, ref, reason)
	}
	var s runSummary
	if v != nil {
		s = runner.SummarizeView(v)
	}
	// A workflow run's cancel is a request, for a worker that serves the
	// workflow to carry out: which child runs it ends is for the
	// workflow's definition to say.
	requested := err == nil && what == "cancel" && ref.Kind == "workflow" && !v.RunStatus().Terminal()
	if err != nil {
		return failure(err)
	}
	label := what
	if sig != nil {
		label = "signal " + sig.name + " to"
	}
	_, err = fmt.Fprintf(out, "%s %s: %s %s, step %d\n", label, id, s.Kind, s.Name, s.Step)
	if err == nil {
		_, err = fmt.Fprintf(out, "status: %s\n", s.Status)
	}
	if err == nil && requested {
		_, err = fmt.Fprintf(out, "cancel requested: a worker that serves workflow %s cancels the run\n", s.Name)
	}
	if err == nil && recordOnly {
		_, err = fmt.Fprintln(out, "recorded in the store: the process serving the run on memory:// (calf run, chat, serve) wakes it within "+
			"a second or two; calf worker processes on a shared broker need --broker")
	}
	return failure(err)
}
