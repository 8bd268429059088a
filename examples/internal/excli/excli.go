package excli

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"

	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/openai"
)

// Main runs an example named name: it defines the -model flag, parses the
// command line (flags the example defined before are parsed too), takes
// the task from the arguments or, without any, def, and calls run with a
// context that Ctrl-C cancels and the OpenAI-compatible model that
// OPENAI_API_KEY and OPENAI_BASE_URL configure. It prints run's result. On
// an error it prints "name: error" to standard error and exits with
// status 2 when no model is configured, 1 otherwise.
func Main(name, def string, run func(ctx context.Context, m model.Model, task string) (string, error)) {
	modelName := flag.String("model", "gpt-4o-mini", "model name")
	flag.Parse()
	task := strings.Join(flag.Args(), " ")
	if task == "" {
		task = def
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	m, err := openai.FromEnv(*modelName)
	if err != nil {
		stop()
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(2)
	}
	out, err := run(ctx, m, task)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
	fmt.Println(out)
}
