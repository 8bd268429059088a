package excli

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"

	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/models"
)

// Main runs an example named name: it defines the -model flag, parses the
// command line (flags the example defined before are parsed too), takes
// the task from the arguments or, without any, def, and calls run with a
// context that Ctrl-C cancels and the model -model names (see
// model/models: openai:NAME, anthropic:NAME, gemini:NAME, ollama:NAME, a
// bare OpenAI model name, or URL#NAME), configured by its provider's
// environment (OPENAI_API_KEY, ANTHROPIC_API_KEY, GEMINI_API_KEY, ...). It prints run's result. On
// an error it prints "name: error" to standard error and exits with
// status 2 when no model is configured, 1 otherwise.
func Main(name, def string, run func(ctx context.Context, m model.Model, task string) (string, error)) {
	spec := flag.String("model", "openai:gpt-4o-mini", "the model: openai:NAME, anthropic:NAME, gemini:NAME, ollama:NAME, or URL#NAME")
	flag.Parse()
	task := strings.Join(flag.Args(), " ")
	if task == "" {
		task = def
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	m, err := models.Open(*spec, nil)
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
