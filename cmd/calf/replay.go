package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/calf-go/calf/adapters"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/agent/approval"
)

type replayFlags struct {
	agentFlags
	store string
}

func newReplayCommand(getenv func(string) string) *cobra.Command {
	var f replayFlags
	cmd := &cobra.Command{
		Use:   "replay RUN",
		Short: "Run a recorded run again, its model's answers taken from the recording",
		Long: `calf replay runs a run of the store again, in this process, with the same prompt: each model
call is answered with the response the run recorded, in order, and no model is called. The
tools run again, with the flags given here (--read, --edit, --bash, --mode, --hook…), so
that a tool, a hook or a permission can be debugged against what the model really said. It
streams the replay as calf run does, and says at the end whether the answer is the recorded
run's. A replay that asks for more model calls than were recorded fails, naming the run.`,
		Args: oneID,
		RunE: func(cmd *cobra.Command, args []string) error {
			return replay(cmd.Context(), &f, args[0], getenv, cmd)
		},
	}
	fl := cmd.Flags()
	f.register(fl)
	fl.StringVar(&f.store, "store", defaultStore, storeHelp+"; where the recorded run is")
	_ = fl.MarkHidden("model")
	return cmd
}

func replay(ctx context.Context, f *replayFlags, runID string, getenv func(string) string, cmd *cobra.Command) error {
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	st, err := openStore(ctx, f.store, nil)
	if err != nil {
		return err
	}
	defer st.Close()
	b, err := openBroker(ctx, defaultBroker, nil)
	if err != nil {
		return err
	}
	defer b.Close()
	w := agent.NewWorker(b, st, &agent.WorkerOptions{DrainTimeout: shutdownTimeout, Runtime: runtimeOptions(ctx)})
	rt := w.Runtime()
	recorded, err := rt.LoadRun(ctx, runID)
	if err != nil {
		return failure(err)
	}
	rec, err := rt.Recording(ctx, runID)
	if err != nil {
		return failure(err)
	}
	f.replay = rec
	a, err := newAssistant(ctx, &f.agentFlags, getenv, true)
	if err != nil {
		return err
	}
	if err := a.Serve(ctx, rt, nil); err != nil {
		return failure(err)
	}
	defer backgroundWorker(ctx, w)()
	_, total := rec.Used()
	fmt.Fprintf(stderr, "replaying run %s (%d model responses recorded) on %s\n", runID, total, adapters.Redact(f.store))
	v := newHumanView(stdout, stderr, false, func(id string) ([]agent.ToolCallRecord, error) {
		st, err := rt.LoadRun(ctx, id)
		if err != nil {
			return nil, err
		}
		return st.ToolCalls, nil
	})
	var out *agent.OutputEvent
	var runErr error
	for ev, err := range a.RunStream(ctx, rt, rec.Prompt(), nil) {
		if err != nil {
			runErr = err
			break
		}
		if ev.Kind == agent.EventApproval && ev.Approval.Status == approval.Pending {
			fmt.Fprintf(stderr, "? %s needs approval: the replay denies it (give --mode to allow it)\n", ev.Approval.ToolName)
			if _, err := approval.Respond(ctx, rt.Store(), rt.Client(), ev.Approval.ID, approval.Answer{Message: "the replay denies what needs approval", Digest: ev.Approval.Digest}); err != nil {
				runErr = err
				break
			}
		}
		if ev.Kind == agent.EventOutput {
			out = ev.Output
		}
		if err := v.show(ev); err != nil {
			runErr = fmt.Errorf("write the output: %w", err)
			break
		}
	}
	if err := v.close(); err != nil && runErr == nil {
		runErr = fmt.Errorf("write the output: %w", err)
	}
	if runErr != nil {
		return failure(runErr)
	}
	same := out != nil && recorded.Output != nil && jsonEqual(out.Content, recorded.Output)
	verdict := "the answer differs from the recorded run's"
	if same {
		verdict = "the answer is the recorded run's"
	}
	used, total := rec.Used()
	fmt.Fprintf(stderr, "replayed: %d of %d model responses used; %s\n", used, total, verdict)
	return nil
}

// jsonEqual reports whether a and b are the same JSON value.
func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}
