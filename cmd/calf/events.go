package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/adapters"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/eventlog"
	"github.com/calf-go/calf/runner"
	"github.com/calf-go/calf/store"
)

func newEventsCommand() *cobra.Command {
	var brokerURL, agentName, run string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "events",
		Short: "Follow the events of the agents on a shared broker as they happen",
		Long: `calf events prints the events of every agent (or of --agent) on a shared broker as they
happen, one line each: the time, the agent, the run, and what happened. --run keeps the
events of one run and of the runs it started. --json prints each message whole. It follows
until interrupted; it only watches (a group of its own), taking nothing from the workers.`,
		Example: `  calf events --broker nats://127.0.0.1:4222
  calf events --broker nats://127.0.0.1:4222 --agent assistant --run 5f0c…`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return followEvents(cmd.Context(), brokerURL, agentName, run, asJSON, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&brokerURL, "broker", "", "the shared broker to follow (nats://, kafka://)")
	fl.StringVar(&agentName, "agent", "", "only this agent's events")
	fl.StringVar(&run, "run", "", "only the events of this run and of the runs it started")
	fl.BoolVar(&asJSON, "json", false, "print each message as one line of JSON")
	return cmd
}

func followEvents(ctx context.Context, brokerURL, agentName, run string, asJSON bool, out, errOut io.Writer) error {
	if brokerURL == "" || adapters.InProcess(brokerURL) {
		return usageError(errors.New("calf events follows a shared broker: give --broker nats://… or kafka://… (an in-process broker has no events to see from here)"))
	}
	pattern := "calf.agent.>"
	if agentName != "" {
		if err := calf.ValidatePattern("calf.agent." + agentName + ".>"); err != nil {
			return usageError(fmt.Errorf("--agent %q: %v", agentName, err))
		}
		pattern = "calf.agent." + agentName + ".>"
	}
	b, err := openBroker(ctx, brokerURL, nil)
	if err != nil {
		return err
	}
	defer b.Close()
	c := calf.NewClient(b, nil)
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
		defer cancel()
		_ = c.Shutdown(sctx)
	}()
	var mu sync.Mutex
	var werr error
	fail := make(chan struct{})
	// The empty group is a private one: every event, none taken away.
	if err := c.Handle(ctx, pattern, func(_ context.Context, m *calf.Message) error {
		if run != "" && m.Metadata.RunID != run && m.Metadata.CorrelationID != run {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		if werr != nil {
			return nil
		}
		var line string
		if asJSON {
			data, _ := json.Marshal(m)
			line = string(data)
		} else {
			line = eventLine(m)
		}
		if _, err := fmt.Fprintln(out, line); err != nil {
			werr = err
			close(fail)
		}
		return nil
	}, nil); err != nil {
		return failure(err)
	}
	fmt.Fprintf(errOut, "calf events: following %s on %s\n", pattern, adapters.Redact(brokerURL))
	select {
	case <-ctx.Done():
		return nil
	case <-fail:
		return failure(fmt.Errorf("write the events: %w", werr))
	}
}

// eventLine describes a message in one line: its time, agent, run and
// what it says.
func eventLine(m *calf.Message) string {
	agentName, kind := channelParts(m.Channel)
	what := kind
	if ev, err := agent.DecodeEvent(m); err == nil {
		switch ev.Kind {
		case agent.EventDelta:
			if ev.Delta != nil && ev.Delta.Text != "" {
				what = fmt.Sprintf("delta %q", ev.Delta.Text)
			} else {
				what = "delta (tool call)"
			}
		case agent.EventOutput:
			what = "output " + ev.Output.Status
			if ev.Output.Error != "" {
				what += ": " + ev.Output.Error
			}
		case agent.EventInput:
			what = "input " + oneLine(ev.Input.Content, 60)
		default:
			if d := runner.Describe(ev); d != "" {
				_, what, _ = strings.Cut(d, ": ")
			}
		}
	}
	run := m.Metadata.RunID
	if len(run) > 12 {
		run = run[:12]
	}
	return fmt.Sprintf("%s  %-12s %-12s %s", m.Metadata.Time.Local().Format("15:04:05.000"), agentName, run, oneLine(what, lineWidth))
}

// channelParts splits calf.agent.{name}.{kind…} into the agent and the kind.
func channelParts(channel string) (string, string) {
	rest, ok := strings.CutPrefix(channel, "calf.agent.")
	if !ok {
		return "", channel
	}
	name, kind, _ := strings.Cut(rest, ".")
	return name, kind
}

func newTraceCommand() *cobra.Command {
	var storeURL string
	cmd := &cobra.Command{
		Use:   "trace RUN",
		Short: "Print the causal tree of a run's recorded events, with timings",
		Long: `calf trace prints the events of a run as a tree: each event under the event whose handling
emitted it, with the time since the run started and, for a tool call or a model call, how long
it took to its result. It reads the run's event log, which calf serve records, and calf run and
calf worker record with --record; the log of a run holds the runs it started too.`,
		Args: oneID,
		RunE: func(cmd *cobra.Command, args []string) error {
			return printTrace(cmd.Context(), storeURL, args[0], cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&storeURL, "store", defaultStore, storeHelp+"; the workers' store")
	return cmd
}

func printTrace(ctx context.Context, storeURL, run string, out io.Writer) error {
	st, err := openStore(ctx, storeURL, nil)
	if err != nil {
		return err
	}
	defer st.Close()
	evs, err := eventlog.Read(ctx, st, run, 0, 0)
	if err != nil {
		return failure(err)
	}
	if len(evs) == 0 {
		if _, err := runner.Summarize(ctx, st, run); errors.Is(err, store.ErrNotFound) {
			return failure(fmt.Errorf("no such run: %s", run))
		}
		return failure(fmt.Errorf("run %s was not recorded (it has no event log): calf serve records its runs' events, and calf run and calf worker with --record", run))
	}
	_, err = io.WriteString(out, traceTree(evs))
	return failure(err)
}

// traceTree renders events as a tree by causation, deltas folded into a
// count under their model call.
func traceTree(evs []eventlog.Event) string {
	byID := map[string]*traceNode{}
	var roots []*traceNode
	start := evs[0].Message.Metadata.Time
	var nodes []*traceNode
	for _, e := range evs {
		m := e.Message
		if m.Metadata.Time.Before(start) {
			start = m.Metadata.Time
		}
		n := &traceNode{ev: e}
		nodes = append(nodes, n)
		byID[m.ID] = n
	}
	for _, n := range nodes {
		m := n.ev.Message
		parent := byID[m.Metadata.CausationID]
		if _, kind := channelParts(m.Channel); kind == "stream" && parent != nil {
			parent.deltas++
			parent.deltaText += deltaText(m)
			continue
		}
		if parent == nil || parent == n {
			roots = append(roots, n)
			continue
		}
		parent.children = append(parent.children, n)
	}
	var b strings.Builder
	last := start
	for _, e := range evs {
		last = maxTime(last, e.Message.Metadata.Time)
	}
	fmt.Fprintf(&b, "run %s · %d events · %s\n", evs[0].Log, len(evs), last.Sub(start).Round(time.Millisecond))
	for i, r := range roots {
		r.write(&b, "", i == len(roots)-1, start)
	}
	return b.String()
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func deltaText(m *calf.Message) string {
	var ev agent.StreamEvent
	if json.Unmarshal(m.Data, &ev) != nil {
		return ""
	}
	return ev.Delta.Text
}

type traceNode struct {
	ev        eventlog.Event
	children  []*traceNode
	deltas    int
	deltaText string
}

func (n *traceNode) write(b *strings.Builder, prefix string, lastChild bool, start time.Time) {
	branch, next := "├─ ", "│  "
	if lastChild {
		branch, next = "└─ ", "   "
	}
	m := n.ev.Message
	name, kind := channelParts(m.Channel)
	label := kind
	if ev, err := agent.DecodeEvent(m); err == nil {
		switch ev.Kind {
		case agent.EventInput:
			label = "input " + fmt.Sprintf("%q", oneLine(ev.Input.Content, 50))
		case agent.EventInference:
			label = fmt.Sprintf("model call %d", ev.Step)
		case agent.EventToolCall:
			label = "tool call " + ev.ToolCall.ToolName + " " + oneLine(compactJSON(ev.ToolCall.Arguments), 50)
		case agent.EventToolResult:
			label = "tool result " + ev.ToolResult.ToolName + " " + ev.ToolResult.Status
		case agent.EventOutput:
			label = "output " + ev.Output.Status
		default:
			if d := runner.Describe(ev); d != "" {
				_, label, _ = strings.Cut(d, ": ")
			}
		}
	}
	line := fmt.Sprintf("%s%s%s %s  +%s", prefix, branch, name, label, m.Metadata.Time.Sub(start).Round(time.Millisecond))
	// A call's time is until the first event it caused.
	if len(n.children) > 0 && (kind == "inference" || strings.HasPrefix(kind, "tool_call")) {
		first := n.children[0].ev.Message.Metadata.Time
		for _, c := range n.children[1:] {
			if c.ev.Message.Metadata.Time.Before(first) {
				first = c.ev.Message.Metadata.Time
			}
		}
		line += fmt.Sprintf(" (%s)", first.Sub(m.Metadata.Time).Round(time.Millisecond))
	}
	if n.deltas > 0 {
		line += fmt.Sprintf("  [%d deltas: %s]", n.deltas, oneLine(strings.TrimSpace(n.deltaText), 40))
	}
	if p := m.Metadata.Producer; p != "" {
		line += "  by " + p // the worker that published it
	}
	b.WriteString(line + "\n")
	slices.SortStableFunc(n.children, func(x, y *traceNode) int {
		return cmp.Compare(x.ev.Seq, y.ev.Seq)
	})
	for i, c := range n.children {
		c.write(b, prefix+next, i == len(n.children)-1, start)
	}
}
