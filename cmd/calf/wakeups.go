package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/memory"
)

func newWakeUpsCommand() *cobra.Command {
	var storeURL string
	cmd := &cobra.Command{
		Use:   "wakeups",
		Short: "List and cancel the follow-ups agents scheduled in their sessions",
		Long: `List and cancel the follow-ups agents scheduled in their sessions.

An agent given wake-ups (agent.Options.WakeUps) has the tool
schedule_wakeup, with which its model schedules a follow-up of its own in
the session ("check the build again in 20 minutes"): a durable timer in the
store that, when due, starts the session's next turn with the model's note.
These commands read and change the timers of --store.`,
		Args: noArgs,
	}
	cmd.PersistentFlags().StringVar(&storeURL, "store", defaultStore, storeHelp+"; the workers' store")
	var agentName, sessionID string
	var asJSON bool
	list := &cobra.Command{
		Use:   "list",
		Short: "List the follow-ups pending in a session",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if agentName == "" || sessionID == "" {
				return usageError(errors.New("give the agent (--agent) and the session (--session) whose follow-ups to list"))
			}
			return withRuntime(cmd.Context(), storeURL, "", func(rt *agent.Runtime) error {
				ws, err := rt.WakeUps(cmd.Context(), agentName, sessionID)
				if err != nil {
					return err
				}
				if asJSON {
					return jsonLines(cmd.OutOrStdout(), ws)
				}
				return printWakeUps(cmd.OutOrStdout(), ws)
			})
		},
	}
	list.Flags().StringVar(&agentName, "agent", "", "the agent")
	list.Flags().StringVar(&sessionID, "session", "", "the session")
	list.Flags().BoolVar(&asJSON, "json", false, "print each follow-up as one line of JSON")
	cancel := &cobra.Command{
		Use:   "cancel ID",
		Short: "Cancel a follow-up (its id from calf wakeups list)",
		Args:  oneIDOf("follow-up id", "calf wakeups list"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withRuntime(cmd.Context(), storeURL, "", func(rt *agent.Runtime) error {
				ok, err := rt.CancelWakeUp(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				if !ok {
					return fmt.Errorf("no pending follow-up %s (it fired, or was cancelled)", args[0])
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "cancelled follow-up %s\n", args[0])
				return err
			})
		},
	}
	cmd.AddCommand(list, cancel)
	return cmd
}

// withRuntime opens the store (and the broker, when brokerURL is set;
// else an in-process one that reaches nobody) and calls fn with a runtime
// on them.
func withRuntime(ctx context.Context, storeURL, brokerURL string, fn func(rt *agent.Runtime) error) error {
	st, err := openStore(ctx, storeURL, nil)
	if err != nil {
		return err
	}
	defer st.Close()
	var b calf.Broker
	if brokerURL != "" {
		if b, err = openBroker(ctx, brokerURL, nil); err != nil {
			return err
		}
	} else {
		b = memory.New(nil)
	}
	defer b.Close()
	c := calf.NewClient(b, nil)
	defer c.Close()
	return failure(fn(agent.NewRuntime(c, st, nil)))
}

func printWakeUps(out io.Writer, ws []agent.WakeUp) error {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tDUE\tNOTE")
	for _, w := range ws {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", w.ID, w.Due.Format(time.RFC3339), oneLine(w.Note, 60))
	}
	return tw.Flush()
}
