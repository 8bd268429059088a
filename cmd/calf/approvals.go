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

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/adapters"
	"github.com/calf-go/calf/agent/approval"
)

// approvalArgumentsWidth bounds the arguments column of calf approvals list.
const approvalArgumentsWidth = 60

func newApprovalsCommand() *cobra.Command {
	var storeURL string
	cmd := &cobra.Command{
		Use:   "approvals",
		Short: "List, show, approve and deny the tool calls that wait for a person",
		Long: `List, show, approve and deny the tool calls that wait for a person.

An agent with permissions (agent.Options.Permissions) turns a tool call its
mode does not accept into an approval request, stored with the run, and the
run waits, holding nothing, until someone answers. These commands read the
requests in the workers' store; approve and deny record the answer and
publish it on the workers' broker (--broker), where a worker carries it out.

On the embedded default (calf run, calf chat or calf serve on the
in-process broker, with the SQLite file of --store), approve and deny need
no --broker: the answer is recorded in the store, and the process whose run
waits, which reads the requests its runs wait for every second, carries it
out. Give the same --store as that process (the default file when it used
the default).`,
		Example: `  calf approvals list
  calf approvals approve r1/call_1          # a calf run waiting in another terminal
  calf approvals deny --message "not on Fridays" r1/call_1
  calf approvals approve --broker nats://127.0.0.1:4222 --store postgres://calf@db/calf r1/call_1`,
		Args: noArgs,
	}
	cmd.PersistentFlags().StringVar(&storeURL, "store", defaultStore, storeHelp+"; the workers' store")

	var run string
	var all, asJSON bool
	list := &cobra.Command{
		Use:   "list",
		Short: "List the pending approval requests (--all: answered ones, and those whose runs ended, too)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return listApprovals(cmd.Context(), storeURL, run, all, asJSON, cmd.OutOrStdout())
		},
	}
	list.Flags().StringVar(&run, "run", "", "only the requests of this run")
	list.Flags().BoolVar(&all, "all", false, "also the requests that were answered, and those whose runs ended (cancelled)")
	list.Flags().BoolVar(&asJSON, "json", false, "print each request as one line of JSON")

	show := &cobra.Command{
		Use:   "show ID",
		Short: "Print an approval request, as JSON",
		Args:  oneApprovalID,
		RunE: func(cmd *cobra.Command, args []string) error {
			return showApproval(cmd.Context(), storeURL, args[0], cmd.OutOrStdout())
		},
	}

	var brokerURL, message, arguments, digest string
	answer := func(approve bool) func(*cobra.Command, []string) error {
		return func(cmd *cobra.Command, args []string) error {
			return answerApproval(cmd.Context(), storeURL, brokerURL, args[0], approval.Answer{
				Approve: approve, Message: message, Arguments: json.RawMessage(arguments), Digest: digest,
			}, cmd.OutOrStdout())
		}
	}
	approve := &cobra.Command{
		Use:   "approve ID",
		Short: "Approve a tool call: a worker runs it (with --arguments, with those instead)",
		Args:  oneApprovalID,
		RunE:  answer(true),
	}
	approve.Flags().StringVar(&arguments, "arguments", "", "run the call with these arguments (a JSON object) instead")
	deny := &cobra.Command{
		Use:   "deny ID",
		Short: "Deny a tool call: the model is told --message",
		Args:  oneApprovalID,
		RunE:  answer(false),
	}
	for _, c := range []*cobra.Command{approve, deny} {
		c.Flags().StringVar(&brokerURL, "broker", "", brokerHelp+"; the workers' broker. Default: none, the answer is only recorded in --store, "+
			"where the process serving the run on memory:// (calf run, chat, serve) finds it")
		c.Flags().StringVar(&message, "message", "", "the answer's message (for a denial, what the model is told)")
		c.Flags().StringVar(&digest, "digest", "", "the digest of the request as you saw it (calf approvals show); default: the stored request's, whose arguments this command prints")
	}
	cmd.AddCommand(list, show, approve, deny)
	return cmd
}

// oneApprovalID accepts exactly one argument, the id of a request.
var oneApprovalID = oneIDOf("approval request id", "calf approvals list")

func listApprovals(ctx context.Context, storeURL, run string, all, asJSON bool, out io.Writer) error {
	st, err := openStore(ctx, storeURL, nil)
	if err != nil {
		return err
	}
	defer st.Close()
	status := approval.Pending
	if all {
		status = ""
	}
	reqs, err := approval.List(ctx, st, run, status)
	if err != nil {
		return failure(err)
	}
	if asJSON {
		return failure(jsonLines(out, reqs))
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tAGENT\tTOOL\tKIND\tARGUMENTS\tSTATUS\tREQUESTED")
	for _, r := range reqs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.Agent, r.ToolName, r.ToolKind,
			oneLine(string(r.Arguments), approvalArgumentsWidth), r.Status, r.RequestedAt.UTC().Format(time.RFC3339))
	}
	return failure(tw.Flush())
}

func showApproval(ctx context.Context, storeURL, id string, out io.Writer) error {
	st, err := openStore(ctx, storeURL, nil)
	if err != nil {
		return err
	}
	defer st.Close()
	r, err := approval.Get(ctx, st, id)
	if err != nil {
		return failure(err)
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return failure(err)
	}
	_, err = fmt.Fprintf(out, "%s\n", b)
	return failure(err)
}

// answerApproval records the answer to the request id in storeURL and
// publishes it on brokerURL. Without a broker (or with memory://), the
// answer is only recorded: the process that serves the run on its
// in-process broker reads the requests its runs wait for, and carries the
// answer out itself.
func answerApproval(ctx context.Context, storeURL, brokerURL, id string, ans approval.Answer, out io.Writer) error {
	if brokerURL == "" {
		brokerURL = defaultBroker
	}
	if err := checkBroker(brokerURL); err != nil {
		return err
	}
	recordOnly := isMemory(brokerURL)
	if recordOnly && isMemory(storeURL) {
		return usageError(errors.New("--store memory: is this command's own, where no run waits: give the --store of the process whose run waits, " +
			"or --broker, the workers' broker"))
	}
	if !recordOnly && adapters.InProcess(brokerURL) {
		return usageError(fmt.Errorf("--broker %s: no worker is reachable there; give the workers' broker", adapters.Redact(brokerURL)))
	}
	if len(ans.Arguments) > 0 && !json.Valid(ans.Arguments) {
		return usageError(errors.New("--arguments is not JSON"))
	}
	st, err := openStore(ctx, storeURL, nil)
	if err != nil {
		return err
	}
	defer st.Close()
	// Check the id, and take the digest, before connecting to the broker.
	req, err := approval.Get(ctx, st, id)
	if err != nil {
		return failure(err)
	}
	if ans.Digest == "" {
		ans.Digest = req.Digest
	}
	// On memory://, a broker of this command's own, the answer would reach
	// no one: it is recorded only, and the process serving the run
	// publishes it.
	var c *calf.Client
	if !recordOnly {
		b, err := openBroker(ctx, brokerURL, nil)
		if err != nil {
			return err
		}
		defer b.Close()
		c = calf.NewClient(b, nil)
		defer c.Close()
	}
	a, err := approval.Respond(ctx, st, c, id, ans)
	if errors.Is(err, approval.ErrRunEnded) && a != nil {
		return failure(fmt.Errorf("approval request %s cannot be answered, its run has ended: %s", id, a.Message))
	}
	if err != nil {
		return failure(err)
	}
	args := a.Arguments
	if len(a.ApprovedArguments) > 0 {
		args = a.ApprovedArguments
	}
	if a.Status == approval.Approved {
		_, err = fmt.Fprintf(out, "approved %s: %s %s\n", a.ID, a.ToolName, args)
	} else {
		_, err = fmt.Fprintf(out, "denied %s: %s %s\n", a.ID, a.ToolName, a.Arguments)
	}
	if err == nil && recordOnly {
		_, err = fmt.Fprintln(out, "recorded in the store: the process serving the run on memory:// (calf run, chat or serve) carries it out within "+
			"a second or two; calf worker processes on a shared broker need --broker")
	}
	return failure(err)
}
