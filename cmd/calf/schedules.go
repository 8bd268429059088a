package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/calf-go/calf/adapters"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/schedule"
)

func newSchedulesCommand() *cobra.Command {
	var storeURL, brokerURL, triggerKey string
	cmd := &cobra.Command{
		Use:   "schedules",
		Short: "Add, list, show, pause, resume, remove and trigger the schedules that start runs",
		Long: `Add, list, show, pause, resume, remove and trigger the schedules that start runs.

A schedule starts a run of an agent, a team or a workflow at the times of a
cron expression (five fields, or @hourly, @daily, @weekly, @monthly, in a
time zone) or at an interval. Schedules are records in the workers' store,
each firing a durable timer: the workers (calf worker) carry them out, each
firing once, whichever worker is up. These commands change the store;
trigger publishes a firing on the workers' broker (--broker).`,
		Example: `  calf schedules add --agent digest --cron "0 9 * * 1-5" --tz Europe/Paris --prompt "Summarize yesterday" morning
  calf schedules add --workflow report --every 6h --state '{"region":"eu"}' reports
  calf schedules list
  calf schedules trigger --broker nats://127.0.0.1:4222 morning`,
		Args: noArgs,
	}
	cmd.PersistentFlags().StringVar(&storeURL, "store", defaultStore, storeHelp+"; the workers' store")

	var spec schedule.Spec
	var agentName, teamName, workflowName, state, overlap, catchUp string
	add := &cobra.Command{
		Use:   "add NAME",
		Short: "Add a schedule (--agent, --team or --workflow; --cron or --every)",
		Args:  oneIDOf("schedule name", "calf schedules list"),
		RunE: func(cmd *cobra.Command, args []string) error {
			spec.Name = args[0]
			n := 0
			for kind, name := range map[string]string{"agent": agentName, "team": teamName, "workflow": workflowName} {
				if name != "" {
					spec.Kind, spec.Runner = kind, name
					n++
				}
			}
			if n != 1 {
				return usageError(errors.New("give one of --agent, --team and --workflow: what the schedule runs"))
			}
			if state != "" {
				spec.State = json.RawMessage(state)
			}
			spec.Overlap, spec.CatchUp = schedule.Overlap(overlap), schedule.CatchUp(catchUp)
			if err := spec.Validate(); err != nil {
				return usageError(err)
			}
			return withScheduler(cmd.Context(), storeURL, "", func(s *schedule.Scheduler) error {
				sc, err := s.Add(cmd.Context(), spec)
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "added schedule %s: %s %s, next %s\n", sc.Name, sc.Kind, sc.Runner, sc.Next.Format(time.RFC3339))
				return err
			})
		},
	}
	add.Flags().StringVar(&agentName, "agent", "", "run this agent")
	add.Flags().StringVar(&teamName, "team", "", "run this team")
	add.Flags().StringVar(&workflowName, "workflow", "", "run this workflow")
	add.Flags().StringVar(&spec.Prompt, "prompt", "", "the prompt of each run (an agent's or a team's)")
	add.Flags().StringVar(&state, "state", "", "the initial state of each run, as JSON (a workflow's)")
	add.Flags().StringVar(&spec.Cron, "cron", "", `a cron expression: five fields ("0 9 * * 1-5") or @hourly, @daily, @weekly, @monthly`)
	add.Flags().StringVar(&spec.TimeZone, "tz", "", "the IANA time zone of --cron, such as Europe/Paris (default UTC)")
	add.Flags().DurationVar(&spec.Every, "every", 0, "an interval (such as 15m or 6h) in place of --cron")
	add.Flags().StringVar(&overlap, "overlap", "", "while the last run is in progress: skip (default), buffer_one or allow")
	add.Flags().StringVar(&catchUp, "catch-up", "", "firings missed while no worker ran: none (default), last or all (within --window)")
	add.Flags().DurationVar(&spec.Window, "window", 0, "how far back --catch-up all goes (default 24h)")

	var asJSON bool
	list := &cobra.Command{
		Use:   "list",
		Short: "List the schedules with their next firings",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withScheduler(cmd.Context(), storeURL, "", func(s *schedule.Scheduler) error {
				all, err := s.List(cmd.Context())
				if err != nil {
					return err
				}
				if asJSON {
					return jsonLines(cmd.OutOrStdout(), all)
				}
				return printSchedules(cmd.OutOrStdout(), all)
			})
		},
	}
	list.Flags().BoolVar(&asJSON, "json", false, "print each schedule as one line of JSON")
	show := &cobra.Command{
		Use:   "show NAME",
		Short: "Print a schedule, with its last firings, as JSON",
		Args:  oneIDOf("schedule name", "calf schedules list"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withScheduler(cmd.Context(), storeURL, "", func(s *schedule.Scheduler) error {
				sc, err := s.Get(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				b, err := json.MarshalIndent(sc, "", "  ")
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s\n", b)
				return err
			})
		},
	}
	control := func(use, short string, fn func(ctx context.Context, s *schedule.Scheduler, name string, out io.Writer) error) *cobra.Command {
		return &cobra.Command{
			Use: use + " NAME", Short: short, Args: oneIDOf("schedule name", "calf schedules list"),
			RunE: func(cmd *cobra.Command, args []string) error {
				return withScheduler(cmd.Context(), storeURL, "", func(s *schedule.Scheduler) error {
					return fn(cmd.Context(), s, args[0], cmd.OutOrStdout())
				})
			},
		}
	}
	pause := control("pause", "Pause a schedule: it starts nothing until resumed", func(ctx context.Context, s *schedule.Scheduler, name string, out io.Writer) error {
		if _, err := s.Pause(ctx, name); err != nil {
			return err
		}
		_, err := fmt.Fprintf(out, "paused schedule %s\n", name)
		return err
	})
	resume := control("resume", "Resume a schedule from its next firing", func(ctx context.Context, s *schedule.Scheduler, name string, out io.Writer) error {
		sc, err := s.Resume(ctx, name)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(out, "resumed schedule %s, next %s\n", name, sc.Next.Format(time.RFC3339))
		return err
	})
	rm := control("rm", "Remove a schedule (the runs it started stay)", func(ctx context.Context, s *schedule.Scheduler, name string, out io.Writer) error {
		if err := s.Delete(ctx, name); err != nil {
			return err
		}
		_, err := fmt.Fprintf(out, "removed schedule %s\n", name)
		return err
	})
	trigger := &cobra.Command{
		Use: "trigger NAME", Short: "Fire a schedule once, now: a worker starts its run", Args: oneIDOf("schedule name", "calf schedules list"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if brokerURL == "" {
				return usageError(errors.New("calf schedules trigger needs --broker: the workers' broker, such as nats://127.0.0.1:4222"))
			}
			if err := checkBroker(brokerURL); err != nil {
				return err
			}
			if adapters.InProcess(brokerURL) {
				return usageError(fmt.Errorf("--broker %s: no worker is reachable there; give the workers' broker", adapters.Redact(brokerURL)))
			}
			return withScheduler(cmd.Context(), storeURL, brokerURL, func(s *schedule.Scheduler) error {
				id, err := s.TriggerWith(cmd.Context(), args[0], &schedule.TriggerOptions{IdempotencyKey: triggerKey})
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "triggered schedule %s: run %s\n", args[0], id)
				return err
			})
		},
	}
	trigger.Flags().StringVar(&brokerURL, "broker", "", brokerHelp+" (required: the workers' broker)")
	trigger.Flags().StringVar(&triggerKey, "idempotency-key", "", "the caller's key: a trigger sent again under it fires once")
	cmd.AddCommand(add, list, show, pause, resume, rm, trigger)
	return cmd
}

// withScheduler calls fn with a scheduler on the runtime of withRuntime.
func withScheduler(ctx context.Context, storeURL, brokerURL string, fn func(s *schedule.Scheduler) error) error {
	return withRuntime(ctx, storeURL, brokerURL, func(rt *agent.Runtime) error { return fn(schedule.New(rt, nil)) })
}

func printSchedules(out io.Writer, all []*schedule.Schedule) error {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tRUNS\tWHEN\tNEXT\tLAST")
	for _, sc := range all {
		when := sc.Cron
		if sc.TimeZone != "" {
			when += " (" + sc.TimeZone + ")"
		}
		if sc.Every > 0 {
			when = "every " + sc.Every.String()
		}
		next := "paused"
		if !sc.Paused {
			next = sc.Next.Format(time.RFC3339)
		}
		last := "-"
		if n := len(sc.History); n > 0 {
			f := sc.History[n-1]
			last = f.At.Format(time.RFC3339) + " " + f.RunID + f.Skipped
		}
		fmt.Fprintf(tw, "%s\t%s %s\t%s\t%s\t%s\n", sc.Name, sc.Kind, sc.Runner, when, next, last)
	}
	return tw.Flush()
}
