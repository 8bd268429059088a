package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/adapters"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/agent/approval"
	"github.com/calf-go/calf/store"
	storemem "github.com/calf-go/calf/store/memory"
)

type replayFlags struct {
	agentFlags
	store string
	// keep records the replay in --store, as a run of its own whose id
	// names its source; by default it is kept out of it.
	keep bool
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
run's. A replay that asks for more model calls than were recorded fails, naming the run.

The replay runs on an in-memory store: it leaves nothing in --store, which it only reads.
--keep records it there, as a run whose id is the source's followed by ".replay." and a
number, so that calf runs lists it apart and calf runs show reads it. A run of a prototypes
file's agent (calf run --agents) is replayed with --agents FILE, as the prototype it ran
(--agent NAME by default the recorded run's agent).`,
		Args: oneID,
		RunE: func(cmd *cobra.Command, args []string) error {
			return replay(cmd.Context(), &f, args[0], getenv, cmd)
		},
	}
	fl := cmd.Flags()
	f.register(fl)
	fl.StringVar(&f.store, "store", defaultStore, storeHelp+"; where the recorded run is")
	fl.BoolVar(&f.keep, "keep", false, "record the replay in --store, as a run named after its source (default: kept out of it)")
	f.registerAgents(fl, true)
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
	src := agent.NewRuntime(calf.NewClient(b, nil), st, runtimeOptions(ctx)) // reads the recording
	recorded, err := src.LoadAgentRun(ctx, runID)
	if errors.Is(err, store.ErrNotFound) {
		return failure(fmt.Errorf("no such run: %s (the store %s holds no agent run with this id; calf runs list shows its runs)", runID, adapters.Redact(f.store)))
	}
	if err != nil {
		return failure(err)
	}
	rec, err := src.Recording(ctx, runID)
	if err != nil {
		return failure(err)
	}
	if f.agentsFile != "" && f.pick == "" {
		f.pick = recorded.Agent
	}
	if f.agentsFile == "" && recorded.Agent != agentName {
		return usageError(fmt.Errorf("run %s is a run of the agent %s, not of the built-in assistant: give the prototypes file it came from with --agents FILE", runID, recorded.Agent))
	}
	// The replay's own store: an in-memory one, unless --keep.
	rst := store.Store(storemem.New())
	if f.keep {
		rst = st
	}
	w := agent.NewWorker(b, rst, &agent.WorkerOptions{DrainTimeout: shutdownTimeout, Runtime: runtimeOptions(ctx)})
	rt := w.Runtime()
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
		st, err := rt.LoadAgentRun(ctx, id)
		if err != nil {
			return nil, err
		}
		return st.ToolCalls, nil
	})
	var out *agent.OutputEvent
	var runErr error
	var opts *agent.RunOptions
	if f.keep {
		opts = &agent.RunOptions{RunID: replayID(ctx, st, runID)}
	}
	var replayRun string
	for ev, err := range a.RunStream(ctx, rt, rec.Prompt(), opts) {
		if err != nil {
			runErr = err
			break
		}
		if ev.Kind == agent.EventApproval && ev.Approval.Status == approval.Pending {
			fmt.Fprintf(stderr, "? %s needs approval: the replay denies it (give --mode to allow it)\n", ev.Approval.ToolName)
			if _, err := rt.Respond(ctx, ev.Approval.ID, approval.Answer{Message: "the replay denies what needs approval", Digest: ev.Approval.Digest}); err != nil {
				runErr = err
				break
			}
		}
		if ev.Kind == agent.EventOutput {
			out = ev.Output
		}
		if replayRun == "" {
			replayRun = ev.RunID
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
	if f.keep {
		fmt.Fprintf(stderr, "recorded as run %s in %s\n", replayRun, adapters.Redact(f.store))
	} else {
		fmt.Fprintf(stderr, "nothing was recorded in %s (--keep records the replay)\n", adapters.Redact(f.store))
	}
	return nil
}

// replayID returns the id of a kept replay of the run source: the source's
// id, ".replay." and the first number from 1 that names no run in st.
func replayID(ctx context.Context, st store.Store, source string) string {
	for n := 1; ; n++ {
		id := fmt.Sprintf("%s.replay.%d", source, n)
		if _, err := st.Get(ctx, store.KindRun, id); errors.Is(err, store.ErrNotFound) || n >= 1000 {
			return id
		}
	}
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
