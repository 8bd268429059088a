// Package httpheader makes HTTP clients that add headers to every request,
// such as an Authorization header, for the protocol clients (MCP, A2A),
// and checks the bearer token of a request, for their servers.
package httpheader
