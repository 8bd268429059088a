package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/calf-go/calf/adapters"
	"github.com/calf-go/calf/deadletter"
)

// deadLetterErrorWidth bounds the error column of calf deadletters list.
const deadLetterErrorWidth = 60

func newDeadLettersCommand() *cobra.Command {
	var storeURL string
	cmd := &cobra.Command{
		Use:   "deadletters",
		Short: "List, show and replay the messages parked on the dead-letter channel",
		Long: `List, show and replay the messages parked on the dead-letter channel.

A message whose handler fails its last attempt (or fails for a reason that
retrying cannot fix) is parked on the channel calf.deadletter. Workers, and
calf run when it serves the agent, record each one in the store; these
commands read them there. Replay republishes the original message on its
channel, once the cause of the failure is fixed.`,
		Args: noArgs,
	}
	cmd.PersistentFlags().StringVar(&storeURL, "store", defaultStore, storeHelp+"; the workers' store")

	var asJSON bool
	list := &cobra.Command{
		Use:   "list",
		Short: "List the recorded dead letters, oldest first",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return listDeadLetters(cmd.Context(), storeURL, asJSON, cmd.OutOrStdout())
		},
	}
	list.Flags().BoolVar(&asJSON, "json", false, "print each dead letter as one line of JSON")

	var raw bool
	show := &cobra.Command{
		Use:   "show ID",
		Short: "Print a dead letter: where it failed, why, and the whole message",
		Args:  oneID,
		RunE: func(cmd *cobra.Command, args []string) error {
			return showDeadLetter(cmd.Context(), storeURL, args[0], raw, cmd.OutOrStdout())
		},
	}
	show.Flags().BoolVar(&raw, "raw", false, "print only the original message's data, byte for byte")

	var brokerURL string
	replay := &cobra.Command{
		Use:   "replay ID",
		Short: "Publish a dead letter's message again on its channel, once",
		Long: `Publish a dead letter's message again on its channel, once.

The message goes to every consumer group of its channel, under a new id
derived from the old one, and the record is marked replayed: replaying it
again does nothing. If it fails again, it is parked again, as a new dead
letter.`,
		Args: oneID,
		RunE: func(cmd *cobra.Command, args []string) error {
			return replayDeadLetter(cmd.Context(), storeURL, brokerURL, args[0], cmd.OutOrStdout())
		},
	}
	replay.Flags().StringVar(&brokerURL, "broker", "", brokerHelp+" (required: the workers' broker)")
	cmd.AddCommand(list, show, replay)
	return cmd
}

// oneID accepts exactly one argument, the id of a dead letter.
var oneID = oneIDOf("dead letter id", "calf deadletters list")

// oneIDOf returns the check that a command has exactly one argument, an id
// of what, which the command list lists.
func oneIDOf(what, list string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != 1 || args[0] == "" {
			return usageError(fmt.Errorf("%s needs one %s (see %s), got %d arguments", cmd.CommandPath(), what, list, len(args)))
		}
		return nil
	}
}

func listDeadLetters(ctx context.Context, storeURL string, asJSON bool, out io.Writer) error {
	st, err := openStore(ctx, storeURL, nil)
	if err != nil {
		return err
	}
	defer st.Close()
	recs, err := deadletter.List(ctx, st)
	if err != nil {
		return failure(err)
	}
	slices.SortStableFunc(recs, func(a, b *deadletter.Record) int {
		return cmp.Or(a.Time.Compare(b.Time), strings.Compare(a.ID, b.ID))
	})
	if asJSON {
		enc := json.NewEncoder(out)
		for _, r := range recs {
			if err := enc.Encode(r); err != nil {
				return failure(err)
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tCHANNEL\tGROUP\tATTEMPTS\tERROR\tTIME\tREPLAYED")
	for _, r := range recs {
		channel := ""
		if r.Message != nil {
			channel = r.Message.Channel
		}
		replayed := "-"
		if r.Replayed() {
			replayed = r.ReplayedAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", r.ID, channel, orDash(r.Group), r.Attempts,
			oneLine(r.Error, deadLetterErrorWidth), r.Time.UTC().Format(time.RFC3339), replayed)
	}
	return failure(tw.Flush())
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func showDeadLetter(ctx context.Context, storeURL, id string, raw bool, out io.Writer) error {
	st, err := openStore(ctx, storeURL, nil)
	if err != nil {
		return err
	}
	defer st.Close()
	r, err := deadletter.Get(ctx, st, id)
	if err != nil {
		return failure(err)
	}
	if raw {
		data := r.RawData
		if len(data) == 0 && r.Message != nil {
			data = r.Message.Data
		}
		_, err := out.Write(data)
		return failure(err)
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return failure(err)
	}
	_, err = fmt.Fprintf(out, "%s\n", b)
	return failure(err)
}

func replayDeadLetter(ctx context.Context, storeURL, brokerURL, id string, out io.Writer) error {
	if brokerURL == "" {
		return usageError(fmt.Errorf("calf deadletters replay needs --broker: the workers' broker, such as nats://127.0.0.1:4222"))
	}
	if err := checkBroker(brokerURL); err != nil {
		return err
	}
	if adapters.InProcess(brokerURL) {
		return usageError(fmt.Errorf("--broker %s: no worker is reachable there; give the workers' broker", adapters.Redact(brokerURL)))
	}
	st, err := openStore(ctx, storeURL, nil)
	if err != nil {
		return err
	}
	defer st.Close()
	// Check the id before connecting to the broker.
	if _, err := deadletter.Get(ctx, st, id); err != nil {
		return failure(err)
	}
	b, err := openBroker(ctx, brokerURL, nil)
	if err != nil {
		return err
	}
	defer b.Close()
	r, published, err := deadletter.Replay(ctx, b, st, id, time.Now())
	if err != nil {
		return failure(err)
	}
	if published {
		_, err = fmt.Fprintf(out, "replayed %s: published %s on %s\n", r.ID, r.ReplayID, r.Message.Channel)
	} else {
		_, err = fmt.Fprintf(out, "%s was replayed already, at %s, as %s: nothing published\n", r.ID, r.ReplayedAt.UTC().Format(time.RFC3339), strconv.Quote(r.ReplayID))
	}
	return failure(err)
}
