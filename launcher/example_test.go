package launcher_test

import (
	"context"
	"os"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/launcher"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/runner"
)

// A program's main is one line, launcher.Main(ctx, cfg); Run is the same
// with the command line, standard input and output given, as a test
// calls it. Here, "run" on a scripted model and a store in memory.
func ExampleRun() {
	greeter := agent.Must(agent.New("greeter", modeltest.NewTestModel(modeltest.Text("Hello, Ada!")), nil))
	cfg := &launcher.Config{Name: "hello", Runners: []runner.Runner{runner.Agent(greeter)}, Store: "memory:"}
	code := launcher.Run(context.Background(), []string{"run", "I am Ada"}, os.Stdin, os.Stdout, os.Stderr, cfg)
	if code != launcher.ExitOK {
		os.Exit(code)
	}
	// Output: Hello, Ada!
}
