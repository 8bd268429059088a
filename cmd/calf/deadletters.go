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
	var sel deadLetterSelection
	replay := &cobra.Command{
		Use:   "replay [ID...]",
		Short: "Publish parked messages again on their channels, once each",
		Long: `Publish parked messages again on their channels, once each.

Name the dead letters by id, or select them: --all replays every one not
yet replayed, and --agent, --channel, --since, --until and --error narrow
the selection (they may be combined; each implies --all's scope). Each
message goes to every consumer group of its channel, under a new id
derived from the old one, and its record is marked replayed: replaying it
again does nothing, so the command can be run again after a failure. A
message that fails again is parked again, as a new dead letter. The
command prints a line per dead letter and fails when any could not be
replayed.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return replayDeadLetters(cmd.Context(), storeURL, brokerURL, args, sel, cmd.OutOrStdout())
		},
	}
	replay.Flags().StringVar(&brokerURL, "broker", "", brokerHelp+" (required: the workers' broker)")
	replay.Flags().BoolVar(&sel.all, "all", false, "replay every recorded dead letter not yet replayed")
	replay.Flags().StringVar(&sel.filter.Agent, "agent", "", "only those of the agent, team or workflow of this name")
	replay.Flags().StringVar(&sel.filter.Channel, "channel", "", "only those of messages on channels matching this pattern (* one token, > the rest)")
	replay.Flags().StringVar(&sel.since, "since", "", "only those parked at or after this time (RFC 3339, or a duration such as 1h for that long ago)")
	replay.Flags().StringVar(&sel.until, "until", "", "only those parked before this time (RFC 3339, or a duration ago)")
	replay.Flags().StringVar(&sel.filter.Error, "error", "", "only those whose error contains this text")
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
		return failure(jsonLines(out, recs))
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

// deadLetterSelection is what calf deadletters replay selects besides ids.
type deadLetterSelection struct {
	all          bool
	filter       deadletter.Filter
	since, until string
}

// any reports whether a selection was asked for.
func (d *deadLetterSelection) any() bool {
	f := d.filter
	return d.all || f.Agent != "" || f.Channel != "" || f.Error != "" || d.since != "" || d.until != ""
}

// parseWhen reads a time flag: RFC 3339, or a duration meaning that long
// before now.
func parseWhen(flag, v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(v); err == nil {
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, usageError(fmt.Errorf("--%s %q: give a time such as 2026-01-02T15:04:05Z, or a duration ago such as 30m", flag, v))
	}
	return t, nil
}

func replayDeadLetters(ctx context.Context, storeURL, brokerURL string, ids []string, sel deadLetterSelection, out io.Writer) error {
	switch {
	case len(ids) == 0 && !sel.any():
		return usageError(fmt.Errorf("calf deadletters replay needs dead letter ids (see calf deadletters list), or --all, or a filter (--agent, --channel, --since, --until, --error)"))
	case len(ids) > 0 && sel.any():
		return usageError(fmt.Errorf("calf deadletters replay takes ids or a selection (--all and the filters), not both"))
	case brokerURL == "":
		return usageError(fmt.Errorf("calf deadletters replay needs --broker: the workers' broker, such as nats://127.0.0.1:4222"))
	}
	now := time.Now()
	var err error
	if sel.filter.Since, err = parseWhen("since", sel.since, now); err != nil {
		return err
	}
	if sel.filter.Until, err = parseWhen("until", sel.until, now); err != nil {
		return err
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
	if sel.any() {
		recs, err := deadletter.Select(ctx, st, sel.filter)
		if err != nil {
			return failure(err)
		}
		for _, r := range recs {
			ids = append(ids, r.ID)
		}
		if len(ids) == 0 {
			_, err := fmt.Fprintln(out, "no dead letter to replay")
			return failure(err)
		}
	} else if len(ids) == 1 {
		// Check a single id before connecting to the broker.
		if _, err := deadletter.Get(ctx, st, ids[0]); err != nil {
			return failure(err)
		}
	}
	b, err := openBroker(ctx, brokerURL, nil)
	if err != nil {
		return err
	}
	defer b.Close()
	var failed int
	var last error
	for _, o := range deadletter.ReplayMany(ctx, b, st, ids, now) {
		r := o.Record
		switch {
		case o.Err != nil:
			failed, last = failed+1, o.Err
			_, err = fmt.Fprintf(out, "%s: not replayed: %v\n", r.ID, o.Err)
		case o.Published:
			_, err = fmt.Fprintf(out, "replayed %s: published %s on %s\n", r.ID, r.ReplayID, r.Message.Channel)
		default:
			_, err = fmt.Fprintf(out, "%s was replayed already, at %s, as %s: nothing published\n", r.ID, r.ReplayedAt.UTC().Format(time.RFC3339), strconv.Quote(r.ReplayID))
		}
		if err != nil {
			return failure(err)
		}
	}
	if failed > 0 {
		if len(ids) == 1 {
			return failure(last)
		}
		return failure(fmt.Errorf("%d of %d dead letters were not replayed; run the command again to retry them", failed, len(ids)))
	}
	return nil
}
