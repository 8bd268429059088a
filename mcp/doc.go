// Package mcp connects Calf agents to the Model Context Protocol, with the
// official Go SDK (github.com/modelcontextprotocol/go-sdk).
//
// A [Client] uses one MCP server, started as a command (stdio) or reached
// by URL (streamable HTTP), and offers its tools to agents as a
// [tool.Toolset]:
//
//	fs, err := mcp.New(mcp.Config{Name: "fs", Command: "mcp-server-filesystem", Args: []string{root}})
//	a, err := agent.New("helper", m, &agent.Options{
//		Toolsets: []tool.Toolset{fs},
//	})
//
// The server's tools then travel as any tool's calls do: as events on the
// agent's channels, through its hooks and permissions, with results
// recorded in the store. A tool's kind, which permission modes read, comes
// from its annotations (read-only, open-world, destructive), execute when
// it has none.
//
// A [Server] offers Calf tools, and agents, teams and workflows as tools
// ([Server.AddRunner]), to MCP clients. A call of an agent, team or
// workflow takes the client's idempotency key in its _meta, under
// [IdempotencyKeyMeta] ("calf/idempotencyKey"; the protocol names no key
// of its own): the same call sent again under the key gets the run the
// first one started and its answer; other arguments under the key are a
// tool error.
package mcp
