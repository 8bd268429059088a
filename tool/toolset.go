package tool

import "context"

// Toolset is a group of tools whose members may change while an agent is
// served, such as the tools of an MCP server. An agent lists a toolset's
// tools before each model call, and looks a tool up in it when the model
// calls it; the calls of all of a toolset's tools travel on one channel
// named after the set.
type Toolset interface {
	// Name names the set. It follows the rules of tool names ([CheckName])
	// and differs from the names of the agent's tools and other sets.
	Name() string
	// Tools returns the set's tools as they are now. It is called before
	// each model call, so it should answer from a cache. When some tools
	// cannot be offered (a server down, a tool with an invalid schema), it
	// returns those it has together with an error that says why; the
	// agent offers those and logs the error.
	Tools(ctx context.Context) ([]Tool, error)
}
