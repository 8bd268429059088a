package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/eval"
	"github.com/calf-go/calf/runner"
)

// evalFlags are the flags of calf eval.
type evalFlags struct {
	agentFlags
	broker, store string
	serve         bool
	id            string
	concurrency   int
	tags          []string
	judge         string
	jsonOut       string
	junitOut      string
	baseline      string
}

func newEvalCommand(getenv func(string) string) *cobra.Command {
	var f evalFlags
	cmd := &cobra.Command{
		Use:   "eval [flags] SET",
		Short: "Run an eval set against an agent and gate on it",
		Long: `Run an eval set against an agent and gate on it.

SET is a YAML (.yaml, .yml) or JSON Lines (.jsonl) file of cases (docs/evaluation.md): an input
each, with checks on the answer, the tool calls expected, rubrics for a judge model (--judge),
budgets and repeats. Every case runs as an ordinary run of the agent: in this process by default,
or, with --broker naming a shared broker, on the calf worker processes serving it there, which
share the cases among them. Each run is named after --id and its case, so that running the set
again under the same --id starts no run twice.

A line per case says how it did, with every check that failed. --json and --junit write the report
to files, for CI; --baseline compares the report with a stored one (a --json file of an earlier
run) case by case. The exit status is 1 when a case fails or, with --baseline, got worse.`,
		Example: `  calf eval evals/calculator.yaml
  calf eval --agents agents.yaml --agent triage --junit report.xml evals/triage.jsonl
  calf eval --judge openai:gpt-4o-mini --json now.json --baseline main.json evals/support.yaml
  calf eval --broker nats://127.0.0.1:4222 --store postgres://calf@db/calf --concurrency 32 evals/all.yaml`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError(fmt.Errorf("calf eval takes one eval set file; got %d arguments", len(args)))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return runEval(cmd.Context(), cmd, f, args[0], getenv, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	f.register(fl)
	f.registerAgents(fl, true)
	fl.StringVar(&f.store, "store", defaultStore, storeHelp)
	fl.StringVar(&f.broker, "broker", defaultBroker, brokerHelp)
	fl.BoolVar(&f.serve, "serve", false, "serve the agent in this process too, when --broker is shared with calf worker processes")
	fl.StringVar(&f.id, "id", "", "names this run of the set (its runs are ID-CASE-N); the same id again starts no run twice (default: a fresh id)")
	fl.IntVar(&f.concurrency, "concurrency", 8, "how many case runs are in progress at once")
	fl.StringSliceVar(&f.tags, "tag", nil, "run only the cases with this tag (repeatable)")
	fl.StringVar(&f.judge, "judge", "", "the model that judges rubrics, as --model names one (cases with rubrics fail without it)")
	fl.StringVar(&f.jsonOut, "json", "", "write the report as JSON to this file (a baseline for --baseline)")
	fl.StringVar(&f.junitOut, "junit", "", "write the report as JUnit XML to this file")
	fl.StringVar(&f.baseline, "baseline", "", "compare with this stored report (--json of an earlier run); a case that got worse fails")
	return cmd
}

// runEval is calf eval.
func runEval(ctx context.Context, cmd *cobra.Command, f evalFlags, setPath string, getenv func(string) string, stdout, stderr io.Writer) error {
	set, err := eval.Load(setPath)
	if err != nil {
		return usageError(err)
	}
	var base *eval.Report
	if f.baseline != "" {
		if base, err = readReport(f.baseline); err != nil {
			return usageError(err)
		}
	}
	if f.concurrency < 1 {
		return usageError(fmt.Errorf("--concurrency is at least 1, not %d", f.concurrency))
	}
	if err := checkBroker(f.broker); err != nil {
		return err
	}
	if err := checkStore(f.store); err != nil {
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
	var judge eval.Judge
	if f.judge != "" {
		choice, err := selectModel(ctx, f.judge, getenv, http.DefaultClient)
		if err != nil {
			return err
		}
		m, err := newModel(choice)
		if err != nil {
			return err
		}
		judge = eval.ModelJudge(m)
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
	if serve {
		w := agent.NewWorker(b, st, &agent.WorkerOptions{Client: &calf.Options{Name: calf.ProcessName()}, DrainTimeout: shutdownTimeout, Runtime: runtimeOptions(ctx)})
		rt = w.Runtime()
		if err := a.Serve(ctx, rt, nil); err != nil {
			return failure(err)
		}
		wctx, stop := context.WithCancel(context.WithoutCancel(ctx))
		ran := make(chan error, 1)
		go func() { ran <- w.Run(wctx) }()
		defer func() {
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
	rep, err := eval.Run(ctx, rt, runner.Agent(a), set, &eval.RunOptions{
		ID: f.id, Concurrency: f.concurrency, Tags: f.tags, Judge: judge,
		Progress: func(r eval.CaseRun, done, total int) {
			mark := "pass"
			if !r.Result.Pass {
				mark = "FAIL"
			}
			fmt.Fprintf(stderr, "[%d/%d] %s %s #%d (%s)\n", done, total, mark, r.Case, r.N+1, r.RunID)
		},
	})
	if err != nil && rep == nil {
		return failure(err)
	}
	printReport(stdout, rep)
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	if f.jsonOut != "" {
		errs = append(errs, writeReportFile(f.jsonOut, func(w io.Writer) error {
			enc := json.NewEncoder(w)
			enc.SetIndent("", "  ")
			return enc.Encode(rep)
		}))
	}
	if f.junitOut != "" {
		errs = append(errs, writeReportFile(f.junitOut, rep.WriteJUnit))
	}
	if base != nil {
		cmp := eval.Compare(base, rep)
		printComparison(stdout, cmp)
		if cmp.Regressed() {
			errs = append(errs, fmt.Errorf("%d of %d cases got worse than in %s", cmp.Worse, len(cmp.Cases), f.baseline))
		}
	}
	if n := len(rep.Cases) - rep.Passed(); n > 0 {
		errs = append(errs, fmt.Errorf("%d of %d cases failed", n, len(rep.Cases)))
	}
	return failure(errors.Join(errs...))
}

func readReport(name string) (*eval.Report, error) {
	fh, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("--baseline: %w", err)
	}
	defer fh.Close()
	rep, err := eval.ReadReport(fh)
	if err != nil {
		return nil, fmt.Errorf("--baseline %s: %w", name, err)
	}
	return rep, nil
}

func writeReportFile(name string, write func(io.Writer) error) error {
	fh, err := os.Create(name)
	if err != nil {
		return err
	}
	if err := write(fh); err != nil {
		_ = fh.Close()
		return fmt.Errorf("write %s: %w", name, err)
	}
	return fh.Close()
}

// printReport writes a line per case, with the checks that failed.
func printReport(w io.Writer, rep *eval.Report) {
	for _, c := range rep.Cases {
		mark := "PASS"
		if !c.Pass {
			mark = "FAIL"
		}
		fmt.Fprintf(w, "%s  %s  %d/%d runs passed\n", mark, c.Case, c.Passed, len(c.Runs))
		seen := map[string]bool{}
		for _, r := range c.Runs {
			for _, ch := range r.Result.Failed() {
				line := ch.Name + ": " + ch.Detail
				if !seen[line] {
					seen[line] = true
					fmt.Fprintf(w, "      %s\n", line)
				}
			}
		}
	}
	fmt.Fprintf(w, "%d of %d cases passed in %s (set %s, id %s)\n", rep.Passed(), len(rep.Cases), rep.Elapsed.Round(time.Millisecond), rep.Set, rep.ID)
}

// printComparison writes the cases that changed since the baseline.
func printComparison(w io.Writer, cmp *eval.Comparison) {
	for _, c := range cmp.Cases {
		if c.Change == eval.Same {
			continue
		}
		fmt.Fprintf(w, "%-7s %s: %.0f%% -> %.0f%% of runs passed; cost %+.6f USD, latency %+s per run\n",
			c.Change, c.Case, 100*c.BeforePassRate, 100*c.AfterPassRate, c.CostDelta, c.LatencyDelta.Round(time.Millisecond))
	}
	fmt.Fprintf(w, "against the baseline: %d better, %d worse\n", cmp.Better, cmp.Worse)
}
