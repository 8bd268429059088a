package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/adapters"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/conversation"
	"github.com/calf-go/calf/conversation/host"
	"github.com/calf-go/calf/internal/convid"
)

func newConversationsCommand(getenv func(string) string) *cobra.Command {
	var storeURL string
	cmd := &cobra.Command{
		Use:   "conversations",
		Short: "Create, list, show, stop, restart and send messages in conversations",
		Long: `Create, list, show, stop, restart and send messages in conversations.

A conversation is one user's exchange with agents made for it from the
registered prototypes (calf prototypes): the user talks to its entry
instance, which may start other instances, each pair on a topic of its own
(docs/conversations.md). calf worker --agents FILE serves them; calf chat
--conversation ID talks in one.`,
		Args: noArgs,
	}
	cmd.PersistentFlags().StringVar(&storeURL, "store", defaultStore, storeHelp+"; the workers' store")

	var nc conversation.NewConversation
	var entry string
	var createJSON bool
	create := &cobra.Command{
		Use:   "create",
		Short: "Create a conversation: its record, its entry instance and the user's topic",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return createConversation(cmd.Context(), storeURL, entry, nc, createJSON, cmd.OutOrStdout())
		},
	}
	create.Flags().StringVar(&nc.UserID, "user", "", "the user's id")
	create.Flags().StringVar(&nc.Description, "description", "", "what the conversation is about")
	create.Flags().StringVar(&entry, "entry", "conversational-agent", "the prototype whose instance the user talks to (registered)")
	create.Flags().BoolVar(&createJSON, "json", false, "print the conversation as JSON")

	var listJSON bool
	list := &cobra.Command{
		Use:   "list",
		Short: "List the conversations, by id",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return listConversations(cmd.Context(), storeURL, listJSON, cmd.OutOrStdout())
		},
	}
	list.Flags().BoolVar(&listJSON, "json", false, "print each conversation as one line of JSON")

	var showJSON bool
	show := &cobra.Command{
		Use:   "show ID",
		Short: "Print a conversation, its instances and its topics",
		Args:  oneIDOf("conversation id", "calf conversations list"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return showConversation(cmd.Context(), storeURL, args[0], showJSON, cmd.OutOrStdout())
		},
	}
	show.Flags().BoolVar(&showJSON, "json", false, "print the conversation, its instances and its topics as one JSON object")

	var brokerURL string
	var stopJSON bool
	stop := &cobra.Command{
		Use:   "stop ID",
		Short: "Stop a conversation and its instances",
		Long: `Stop a conversation and its instances.

The conversation's record is marked stopped, then each instance: from then on
the conversation takes no message and starts no instance. With --broker, the
workers' broker, the runs in progress of its instances are cancelled too,
and on a broker that keeps a resource per channel (Kafka) its channels are
deleted; without it only the records change.`,
		Args: oneIDOf("conversation id", "calf conversations list"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return stopConversation(cmd.Context(), storeURL, brokerURL, args[0], stopJSON, cmd.OutOrStdout())
		},
	}
	stop.Flags().StringVar(&brokerURL, "broker", "", brokerHelp+" (the workers' broker: cancel the runs in progress, delete the channels)")
	stop.Flags().BoolVar(&stopJSON, "json", false, "print the stopped conversation as JSON")
	var restartJSON bool
	restart := &cobra.Command{
		Use:   "restart ID [INSTANCE...]",
		Short: "Put the failed instances of a conversation back to work",
		Long: `Put the failed instances of a conversation back to work.

An instance fails when a run of it ends in an error, or when no worker can
serve it (its prototype removed, its model or tools unavailable, no code for
it): calf conversations show lists it with status error and the reason, and
the messages sent to it are refused with that reason. Messages never restart
it; once the cause is fixed, restart marks it running again, its session
kept, and it takes messages from then on. Without INSTANCE every failed
instance of the conversation is restarted. Only the records change, so no
--broker is needed.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageError(fmt.Errorf("%s needs a conversation id (see calf conversations list)", cmd.CommandPath()))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return restartConversation(cmd.Context(), storeURL, args[0], args[1:], restartJSON, cmd.OutOrStdout())
		},
	}
	restart.Flags().BoolVar(&restartJSON, "json", false, "print each restarted instance as one line of JSON")
	var lf linkFlags
	var wait time.Duration
	var sendJSON bool
	send := &cobra.Command{
		Use:   "send ID MESSAGE",
		Short: "Send the user's message in a conversation and print the answer",
		Long: `Send the user's message in a conversation and print the answer.

The message goes to the conversation's entry instance on the user's channel,
as a program or a UI would send it, and the answer that comes back is
printed; an error answer (the conversation stopped, a failed run) is printed
on standard error with exit status 1, as is no answer within --wait.

With --broker, the workers' broker, calf worker --agents serves the
conversation. Without it, the conversation is served in this process, on the
prototypes registered in --store (--agents FILE registers a file's first),
their agents made as calf worker makes them: --model, --max-turns,
--timeout, --hook, --mcp and --root apply.`,
		Example: `  calf conversations send 0b6f3c3e-8d1a-4c59-9f0e-2a1b3c4d5e6f "Create a docmem called project-notes"
  calf conversations send --broker nats://127.0.0.1:4222 --store postgres://calf@db:5432/calf ID "What does it say?"`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 2 || strings.TrimSpace(args[1]) == "" {
				return usageError(fmt.Errorf("%s needs a conversation id (see calf conversations list) and a message, got %d arguments", cmd.CommandPath(), len(args)))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			lf.conversation, lf.store, lf.changed, lf.stderr = args[0], storeURL, cmd.Flags().Changed, cmd.ErrOrStderr()
			return sendConversation(cmd.Context(), &lf, args[1], wait, sendJSON, getenv, cmd.OutOrStdout())
		},
	}
	lf.registerHost(send.Flags())
	lf.registerLink(send.Flags())
	send.Flags().DurationVar(&wait, "wait", 5*time.Minute, "how long to wait for the answer")
	send.Flags().BoolVar(&sendJSON, "json", false, "print the answer as the conversation message it is, in JSON")
	cmd.AddCommand(create, list, show, stop, restart, send)
	return cmd
}

// printJSON writes v as indented JSON and a newline.
func printJSON(out io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return failure(err)
	}
	_, err = fmt.Fprintf(out, "%s\n", b)
	return failure(err)
}

// timeOrDash formats t in UTC, or "-" for the zero time.
func timeOrDash(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func createConversation(ctx context.Context, storeURL, entry string, nc conversation.NewConversation, asJSON bool, out io.Writer) error {
	if err := convid.CheckName(entry); err != nil {
		return usageError(fmt.Errorf("--entry %q: %w", entry, err))
	}
	if len(nc.UserID) > convid.MaxUserIDLen || len(nc.Description) > convid.MaxDescriptionLen {
		return usageError(fmt.Errorf("--user is at most %d bytes, --description %d", convid.MaxUserIDLen, convid.MaxDescriptionLen))
	}
	st, err := openStore(ctx, storeURL, nil)
	if err != nil {
		return err
	}
	defer st.Close()
	c, err := conversation.NewConversations(st, &conversation.Options{Entry: entry}).Create(ctx, nc)
	if err != nil {
		return failure(err)
	}
	if asJSON {
		return printJSON(out, c)
	}
	in, _ := conversation.Channel(c.ID, conversation.UserParticipant, c.Entry)
	back, _ := conversation.Channel(c.ID, c.Entry, conversation.UserParticipant)
	_, err = fmt.Fprintf(out, "conversation %s\nentry        %s\nsend on      %s\nanswers on   %s\n", c.ID, c.Entry, in, back)
	return failure(err)
}

func listConversations(ctx context.Context, storeURL string, asJSON bool, out io.Writer) error {
	st, err := openStore(ctx, storeURL, nil)
	if err != nil {
		return err
	}
	defer st.Close()
	convs := conversation.NewConversations(st, nil)
	cs, err := convs.List(ctx, "", 0)
	if err != nil {
		return failure(err)
	}
	rows := make([]conversationRow, len(cs))
	for i, c := range cs {
		rows[i].Conversation = c
		insts, err := convs.Instances(ctx, c.ID)
		if err != nil {
			return failure(err)
		}
		for _, in := range insts {
			if in.Status == conversation.StatusError {
				rows[i].Failed = append(rows[i].Failed, in)
			}
		}
	}
	if asJSON {
		return failure(jsonLines(out, rows))
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tUSER\tSTATUS\tCREATED\tENTRY\tFAILED\tDESCRIPTION")
	for _, r := range rows {
		c := r.Conversation
		failed := "-"
		if len(r.Failed) > 0 {
			failed = fmt.Sprintf("%d: %s", len(r.Failed), oneLine(r.Failed[0].Error, 60))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", c.ID, orDash(c.UserID), c.Status, timeOrDash(c.Created), c.Entry, failed, orDash(oneLine(c.Description, 60)))
	}
	return failure(tw.Flush())
}

// conversationRow is a line of calf conversations list: the conversation
// and its failed instances, with their errors.
type conversationRow struct {
	conversation.Conversation
	Failed []conversation.Instance `json:"failed_instances,omitempty"`
}

func restartConversation(ctx context.Context, storeURL, id string, instances []string, asJSON bool, out io.Writer) error {
	if err := convid.CheckConversationID(id); err != nil {
		return usageError(err)
	}
	st, err := openStore(ctx, storeURL, nil)
	if err != nil {
		return err
	}
	defer st.Close()
	convs := conversation.NewConversations(st, nil)
	if len(instances) == 0 {
		insts, err := convs.Instances(ctx, id)
		if err != nil {
			return failure(err)
		}
		for _, in := range insts {
			if in.Status == conversation.StatusError {
				instances = append(instances, in.ID)
			}
		}
		if _, err := convs.Get(ctx, id); err != nil {
			return failure(err)
		}
	}
	var restarted []conversation.Instance
	for _, in := range instances {
		inst, err := convs.Restart(ctx, id, in)
		if err != nil {
			return failure(err)
		}
		restarted = append(restarted, inst)
	}
	if asJSON {
		return failure(jsonLines(out, restarted))
	}
	if len(restarted) == 0 {
		_, err := fmt.Fprintf(out, "no failed instance in %s\n", id)
		return failure(err)
	}
	for _, in := range restarted {
		if _, err := fmt.Fprintf(out, "restarted %s\n", in.ID); err != nil {
			return failure(err)
		}
	}
	return nil
}

// conversationView is what calf conversations show --json prints.
type conversationView struct {
	Conversation conversation.Conversation `json:"conversation"`
	Instances    []conversation.Instance   `json:"instances"`
	Topics       []conversation.Topic      `json:"topics"`
}

func showConversation(ctx context.Context, storeURL, id string, asJSON bool, out io.Writer) error {
	if err := convid.CheckConversationID(id); err != nil {
		return usageError(err)
	}
	st, err := openStore(ctx, storeURL, nil)
	if err != nil {
		return err
	}
	defer st.Close()
	convs := conversation.NewConversations(st, nil)
	v := conversationView{Instances: []conversation.Instance{}, Topics: []conversation.Topic{}}
	if v.Conversation, err = convs.Get(ctx, id); err != nil {
		return failure(err)
	}
	insts, err := convs.Instances(ctx, id)
	if err != nil {
		return failure(err)
	}
	v.Instances = append(v.Instances, insts...)
	topics, err := convs.Topics(ctx, id)
	if err != nil {
		return failure(err)
	}
	v.Topics = append(v.Topics, topics...)
	if asJSON {
		return printJSON(out, v)
	}
	c := v.Conversation
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "conversation\t%s\nuser\t%s\ndescription\t%s\nstatus\t%s\ncreated\t%s\nstopped\t%s\nentry\t%s\n\n",
		c.ID, orDash(c.UserID), orDash(oneLine(c.Description, 200)), c.Status, timeOrDash(c.Created), timeOrDash(c.Stopped), c.Entry)
	fmt.Fprintln(tw, "INSTANCE\tPROTOTYPE\tPARENT\tSTATUS\tCREATED\tSTOPPED")
	for _, in := range v.Instances {
		status := string(in.Status)
		if in.Error != "" {
			status += ": " + oneLine(in.Error, 60)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", in.ID, in.Prototype, in.Parent, status, timeOrDash(in.Created), timeOrDash(in.Stopped))
	}
	fmt.Fprintln(tw, "\nTOPIC\tOPENED BY\tWITH\tCREATED")
	for _, t := range v.Topics {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.Name, t.Participants[0], t.Participants[1], timeOrDash(t.Created))
	}
	return failure(tw.Flush())
}

func stopConversation(ctx context.Context, storeURL, brokerURL, id string, asJSON bool, out io.Writer) error {
	if err := convid.CheckConversationID(id); err != nil {
		return usageError(err)
	}
	if brokerURL != "" {
		if err := checkBroker(brokerURL); err != nil {
			return err
		}
		if adapters.InProcess(brokerURL) {
			return usageError(fmt.Errorf("--broker %s is inside this process, where no worker runs: give the workers' broker, or no --broker to stop the records only",
				adapters.Redact(brokerURL)))
		}
	}
	st, err := openStore(ctx, storeURL, nil)
	if err != nil {
		return err
	}
	defer st.Close()
	convs := conversation.NewConversations(st, nil)
	var c conversation.Conversation
	if brokerURL == "" {
		c, err = convs.Stop(ctx, id)
	} else {
		b, berr := openBroker(ctx, brokerURL, nil)
		if berr != nil {
			return berr
		}
		defer b.Close()
		client := calf.NewClient(b, nil)
		defer func() {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
			defer cancel()
			_ = client.Shutdown(sctx)
		}()
		h := host.New(agent.NewRuntime(client, st, nil), convs, &host.Options{DeleteChannels: true})
		c, err = h.Stop(ctx, id)
	}
	if err != nil {
		return failure(err)
	}
	if asJSON {
		return printJSON(out, c)
	}
	_, err = fmt.Fprintf(out, "stopped %s at %s\n", c.ID, timeOrDash(c.Stopped))
	return failure(err)
}

func sendConversation(ctx context.Context, f *linkFlags, text string, wait time.Duration, asJSON bool, getenv func(string) string, out io.Writer) error {
	if wait <= 0 {
		return usageError(fmt.Errorf("--wait must be positive, got %s", wait))
	}
	l, err := openLink(ctx, f, getenv)
	if err != nil {
		return err
	}
	defer l.close()
	m, err := l.ask(ctx, text, wait)
	if err != nil {
		return err
	}
	if asJSON {
		if err := printJSON(out, m); err != nil {
			return err
		}
	}
	if isRefusal(m) {
		return failure(fmt.Errorf("%s answered with an error: %s", m.AgentID, strings.TrimPrefix(m.Message, convid.ErrorPrefix)))
	}
	if !asJSON {
		_, err = fmt.Fprintln(out, m.Message)
	}
	return failure(err)
}
