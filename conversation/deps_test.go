package conversation_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLinksNoModelProvider: a program that imports only the data model
// links no model provider; the host takes its model opener from its
// caller (package conversation/host).
func TestLinksNoModelProvider(t *testing.T) {
	gocmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	out, err := exec.Command(gocmd, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		switch p {
		case "github.com/calf-go/calf/model/models", "github.com/calf-go/calf/model/openai",
			"github.com/calf-go/calf/model/anthropic", "github.com/calf-go/calf/model/gemini":
			t.Errorf("package conversation links %s", p)
		}
	}
}
