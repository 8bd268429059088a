package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http/httptest"

	"github.com/calf-go/calf/mcp"
	"github.com/calf-go/calf/tool"
)

// A Calf tool offered over MCP, and used back through an MCP client as a
// toolset, as an agent would (agent.Options.Toolsets).
func ExampleNewServer() {
	type in struct {
		A, B int
	}
	add := tool.Must(tool.New("add", "Adds two integers.", func(_ context.Context, x in) (int, error) { return x.A + x.B, nil }))
	s := mcp.NewServer(nil, &mcp.ServerOptions{Name: "calc"})
	if err := s.AddTool(add); err != nil {
		log.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler(nil)) // or s.ServeStdio(ctx)
	defer srv.Close()

	c, err := mcp.New(mcp.Config{Name: "calc", URL: srv.URL})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	tools, err := c.Tools(ctx)
	if err != nil {
		log.Fatal(err)
	}
	res, err := tools[0].Call(ctx, json.RawMessage(`{"A": 2, "B": 40}`))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(tools[0].Definition().Name, "=", res.Text())
	// Output: calc__add = 42
}
