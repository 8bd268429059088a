// Command structured is an agent with a typed output: it extracts a
// structured record from free text. The output type's JSON Schema is sent
// to the model, and the answer is validated against it; an invalid answer is
// sent back to the model with the validation error, a bounded number of
// times.
//
//	OPENAI_API_KEY=... go run ./examples/structured "Ada Lovelace, born 1815 in London, mathematician"
//
// Other providers by name: -model anthropic:claude-haiku-4-5 (with
// ANTHROPIC_API_KEY), -model gemini:gemini-2.5-flash (GEMINI_API_KEY),
// -model ollama:llama3.2 (a local Ollama).
package main

import (
	"context"
	"encoding/json"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/examples/internal/excli"
	"github.com/calf-go/calf/model"
	storemem "github.com/calf-go/calf/store/memory"
)

// Person is the record the agent extracts.
type Person struct {
	Name       string   `json:"name" jsonschema:"the person's full name"`
	BirthYear  int      `json:"birth_year" jsonschema:"the year of birth, 0 if unknown"`
	Birthplace string   `json:"birthplace" jsonschema:"the place of birth, empty if unknown"`
	Roles      []string `json:"roles" jsonschema:"what the person is known as, in lower case"`
}

func main() {
	excli.Main("structured", "Ada Lovelace, born 1815 in London, mathematician and writer", func(ctx context.Context, m model.Model, text string) (string, error) {
		p, err := extract(ctx, m, text)
		if err != nil {
			return "", err
		}
		out, err := json.MarshalIndent(p, "", "  ")
		return string(out), err
	})
}

// extract runs the extraction agent on text and returns the typed record.
func extract(ctx context.Context, m model.Model, text string) (Person, error) {
	b := memory.New(nil)
	defer b.Close()
	client := calf.NewClient(b, nil)
	defer client.Close()
	rt := agent.NewRuntime(client, storemem.New(), nil)

	extractor, err := agent.NewTyped[Person]("extractor", m, &agent.Options{
		Instructions: "Extract the person described by the user's text.",
	})
	if err != nil {
		return Person{}, err
	}
	if err := extractor.Serve(ctx, rt, nil); err != nil {
		return Person{}, err
	}
	out, err := extractor.Run(ctx, rt, text, nil)
	if err != nil {
		return Person{}, err
	}
	return out.Output, nil
}
