package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/calf-go/calf/conversation"
)

func newPrototypesCommand() *cobra.Command {
	var storeURL string
	cmd := &cobra.Command{
		Use:   "prototypes",
		Short: "Register, list, show and remove the agent prototypes of conversations",
		Long: `Register, list, show and remove the agent prototypes of conversations.

A prototype is a named template of agents (docs/conversations.md): its role,
kind (llm, code or external), system prompt, model, built-in tools, MCP
servers, subagents and permissions. Conversations are made of the prototypes
registered in the store; add registers those of a YAML file.`,
		Args: noArgs,
	}
	cmd.PersistentFlags().StringVar(&storeURL, "store", defaultStore, storeHelp+"; the workers' store")

	var replace bool
	add := &cobra.Command{
		Use:   "add FILE",
		Short: "Register every prototype of a YAML file, or none when the file has a problem",
		Long: `Register every prototype of a YAML file, or none when the file has a problem.

The file is checked whole first: every problem is listed with its line, and
nothing is registered. A prototype of a name registered already is refused
(every such name is listed, and nothing is registered) unless --replace is
given.`,
		Args: oneIDOf("file", "docs/conversations.md"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return addPrototypes(cmd.Context(), storeURL, args[0], replace, cmd.OutOrStdout())
		},
	}
	add.Flags().BoolVar(&replace, "replace", false, "replace the prototypes of the same names")

	var asJSON bool
	list := &cobra.Command{
		Use:   "list",
		Short: "List the registered prototypes, by name",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return listPrototypes(cmd.Context(), storeURL, asJSON, cmd.OutOrStdout())
		},
	}
	list.Flags().BoolVar(&asJSON, "json", false, "print each prototype as one line of JSON")

	var showJSON bool
	show := &cobra.Command{
		Use:   "show NAME",
		Short: "Print a registered prototype",
		Args:  oneIDOf("prototype name", "calf prototypes list"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return showPrototype(cmd.Context(), storeURL, args[0], showJSON, cmd.OutOrStdout())
		},
	}
	show.Flags().BoolVar(&showJSON, "json", false, "print the prototype as JSON")

	rm := &cobra.Command{
		Use:   "rm NAME",
		Short: "Remove a registered prototype (the instances started keep their records)",
		Args:  oneIDOf("prototype name", "calf prototypes list"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return removePrototype(cmd.Context(), storeURL, args[0], cmd.OutOrStdout())
		},
	}
	cmd.AddCommand(add, list, show, rm)
	return cmd
}

// loadPrototypes reads the prototypes of a file. A file with problems is a
// usage error whose text lists every one with its line.
func loadPrototypes(file string) ([]conversation.Prototype, error) {
	ps, err := conversation.LoadFile(file)
	if err != nil {
		return nil, usageError(err)
	}
	return ps, nil
}

func addPrototypes(ctx context.Context, storeURL, file string, replace bool, out io.Writer) error {
	if err := checkStore(storeURL); err != nil {
		return err
	}
	ps, err := loadPrototypes(file)
	if err != nil {
		return err
	}
	st, err := openStore(ctx, storeURL, nil)
	if err != nil {
		return err
	}
	defer st.Close()
	protos := conversation.NewPrototypes(st)
	existing := map[string]bool{}
	var taken []string
	for _, p := range ps {
		_, err := protos.Get(ctx, p.Name)
		switch {
		case err == nil:
			existing[p.Name] = true
			taken = append(taken, p.Name)
		case !errors.Is(err, conversation.ErrNotFound):
			return failure(err)
		}
	}
	if len(taken) > 0 && !replace {
		return usageError(fmt.Errorf("%s: prototypes registered already: %s (add --replace to replace them); nothing was registered",
			file, strings.Join(taken, ", ")))
	}
	if err := protos.RegisterAll(ctx, ps, replace); errors.Is(err, conversation.ErrExists) {
		// Registered meanwhile by another process.
		return usageError(fmt.Errorf("%s: %w (add --replace to replace them); nothing was registered", file, err))
	} else if err != nil {
		return failure(err)
	}
	for _, p := range ps {
		verb := "registered"
		if existing[p.Name] {
			verb = "replaced"
		}
		fmt.Fprintf(out, "%s %s (%s)\n", verb, p.Name, kindOf(p))
	}
	return nil
}

// kindOf is the kind of p, its default spelled out.
func kindOf(p conversation.Prototype) conversation.Kind {
	if p.Kind == "" {
		return conversation.KindLLM
	}
	return p.Kind
}

func listPrototypes(ctx context.Context, storeURL string, asJSON bool, out io.Writer) error {
	st, err := openStore(ctx, storeURL, nil)
	if err != nil {
		return err
	}
	defer st.Close()
	ps, err := conversation.NewPrototypes(st).List(ctx)
	if err != nil {
		return failure(err)
	}
	if asJSON {
		return failure(jsonLines(out, ps))
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tKIND\tMODEL\tTOOLS\tSUBAGENTS\tROLE")
	for _, p := range ps {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", p.Name, kindOf(p), orDash(p.Model), orDash(strings.Join(p.Tools, ",")),
			orDash(strings.Join(p.Subagents, ",")), orDash(oneLine(p.Role, 60)))
	}
	return failure(tw.Flush())
}

func showPrototype(ctx context.Context, storeURL, name string, asJSON bool, out io.Writer) error {
	st, err := openStore(ctx, storeURL, nil)
	if err != nil {
		return err
	}
	defer st.Close()
	p, err := conversation.NewPrototypes(st).Get(ctx, name)
	if err != nil {
		return failure(err)
	}
	if asJSON {
		b, err := json.MarshalIndent(p, "", "  ")
		if err != nil {
			return failure(err)
		}
		_, err = fmt.Fprintf(out, "%s\n", b)
		return failure(err)
	}
	var b strings.Builder
	field := func(k, v string) {
		if v != "" {
			fmt.Fprintf(&b, "%-14s %s\n", k+":", v)
		}
	}
	field("name", p.Name)
	field("kind", string(kindOf(p)))
	field("role", p.Role)
	field("description", oneLine(p.Description, 1<<20))
	field("model", p.Model)
	field("tools", strings.Join(p.Tools, ", "))
	for _, s := range p.MCPServers {
		target := s.URL
		if target == "" {
			target = strings.Join(s.Command, " ")
		}
		field("mcp server", s.Name+" = "+target)
	}
	field("subagents", strings.Join(p.Subagents, ", "))
	if pm := p.Permissions; pm != nil {
		var parts []string
		for _, kv := range [][2]string{{"mode", pm.Mode}, {"allowed", strings.Join(pm.Allowed, ",")}, {"disallowed", strings.Join(pm.Disallowed, ",")}} {
			if kv[1] != "" {
				parts = append(parts, kv[0]+" "+kv[1])
			}
		}
		field("permissions", strings.Join(parts, "; "))
	}
	if p.SystemPrompt != "" {
		b.WriteString("system prompt:\n")
		for l := range strings.SplitSeq(strings.TrimRight(p.SystemPrompt, "\n"), "\n") {
			b.WriteString("  " + l + "\n")
		}
	}
	_, err = io.WriteString(out, b.String())
	return failure(err)
}

func removePrototype(ctx context.Context, storeURL, name string, out io.Writer) error {
	st, err := openStore(ctx, storeURL, nil)
	if err != nil {
		return err
	}
	defer st.Close()
	if err := conversation.NewPrototypes(st).Remove(ctx, name); err != nil {
		return failure(err)
	}
	fmt.Fprintf(out, "removed %s\n", name)
	return nil
}
