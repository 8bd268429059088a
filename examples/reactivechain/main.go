// Command reactivechain is a summarizer and a translator driven by state
// rather than called: a document put in the store wakes the summarizer
// (an orchestration rule sets its should_act), its summary wakes the
// translator, and each agent chooses among the actions the state makes
// available to it.
//
//	OPENAI_API_KEY=... go run ./examples/reactivechain -lang French "Calf is an event-driven agent framework for Go..."
//
// Any OpenAI-compatible server works: set OPENAI_BASE_URL and pass -model.
//
// Other providers by name: -model anthropic:claude-haiku-4-5 (with
// ANTHROPIC_API_KEY), -model gemini:gemini-2.5-flash (GEMINI_API_KEY),
// -model ollama:llama3.2 (a local Ollama).
package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/examples/internal/excli"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/reactive"
	storemem "github.com/calf-go/calf/store/memory"
)

// Config is what each agent's context reads.
type Config struct {
	Language string `json:"language,omitempty"`
}

// Agents is the part of the state that drives the agents.
type Agents struct {
	Summarizer reactive.AgentState[Config] `json:"summarizer"`
	Translator reactive.AgentState[Config] `json:"translator"`
}

// State is the application's single source of truth.
type State struct {
	Document    string `json:"document"`
	Summary     string `json:"summary"`
	Translation string `json:"translation"`
	Agents      Agents `json:"agents"`
}

func actions() *reactive.Actions[State] {
	a := &reactive.Actions[State]{}
	reactive.MustAction(a, "add_document", func(s State, text string) (State, []string, error) {
		s.Document, s.Summary, s.Translation = text, "", ""
		return s, []string{"document", "summary", "translation"}, nil
	})
	reactive.MustAction(a, "set_summary", func(s State, text string) (State, []string, error) {
		if text == "" {
			return s, nil, fmt.Errorf("the summary is empty")
		}
		s.Summary = text
		s.Agents.Summarizer.ShouldAct = false
		return s, []string{"summary", "agents.summarizer.should_act"}, nil
	})
	reactive.MustAction(a, "set_translation", func(s State, text string) (State, []string, error) {
		if text == "" {
			return s, nil, fmt.Errorf("the translation is empty")
		}
		s.Translation = text
		s.Agents.Translator.ShouldAct = false
		return s, []string{"translation", "agents.translator.should_act"}, nil
	})
	return a
}

// rules wake the summarizer for a new document, the translator for a new
// summary.
var rules = []reactive.Rule[State]{
	func(s State, d *reactive.Delta) []reactive.Dispatch {
		if d.Changed("document") && s.Document != "" {
			return []reactive.Dispatch{{Action: "summarizer.act", Payload: true}}
		}
		return nil
	},
	func(s State, d *reactive.Delta) []reactive.Dispatch {
		if d.Changed("summary") && s.Summary != "" {
			return []reactive.Dispatch{{Action: "translator.act", Payload: true}}
		}
		return nil
	},
}

func main() {
	lang := flag.String("lang", "French", "the language of the translation")
	excli.Main("reactivechain", "Calf is an event-driven framework for AI agents in Go: every model call and tool call is an event on a broker, and state lives in a store.",
		func(ctx context.Context, m model.Model, document string) (string, error) {
			s, err := run(ctx, m, m, *lang, document)
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("Summary: %s\n%s: %s", s.Summary, *lang, s.Translation), nil
		})
}

// run puts document in the store and waits for the chain to translate
// its summary into lang.
func run(ctx context.Context, summarizerModel, translatorModel model.Model, lang, document string) (State, error) {
	b := memory.New(nil)
	defer b.Close()
	client := calf.NewClient(b, nil)
	defer client.Close()
	st := storemem.New()
	initial := State{Agents: Agents{
		Summarizer: reactive.NewAgentState(Config{}, "set_summary"),
		Translator: reactive.NewAgentState(Config{Language: lang}, "set_translation"),
	}}
	store, err := reactive.NewStore("chain", initial, actions(), &reactive.Options{State: st, Client: client})
	if err != nil {
		return State{}, err
	}
	summarizer := &reactive.Agent[State, Config]{
		Name: "summarizer", Path: "agents.summarizer", Model: summarizerModel,
		StaticContext: "You summarize documents in one or two sentences. You act by choosing an action.",
		Context: func(s State, _ Config) string {
			return "Summarize this document with set_summary (the payload is the summary as a string):\n\n" + s.Document
		},
	}
	translator := &reactive.Agent[State, Config]{
		Name: "translator", Path: "agents.translator", Model: translatorModel,
		StaticContext: "You translate text faithfully. You act by choosing an action.",
		Context: func(s State, c Config) string {
			return "Translate this summary into " + c.Language + " with set_translation (the payload is the translation as a string):\n\n" + s.Summary
		},
	}
	app, err := reactive.NewApp(store, []reactive.AppAgent[State]{summarizer, translator}, rules...)
	if err != nil {
		return State{}, err
	}
	if err := app.Serve(ctx, agent.NewRuntime(client, st, nil)); err != nil {
		return State{}, err
	}
	done := make(chan struct{}, 1)
	store.Subscribe("", func(*reactive.Delta) {
		if s := store.Get(); s.Translation != "" || s.Agents.Summarizer.LastError != "" || s.Agents.Translator.LastError != "" {
			select {
			case done <- struct{}{}:
			default:
			}
		}
	})
	if _, err := store.Dispatch(ctx, "add_document", document); err != nil {
		return State{}, err
	}
	select {
	case <-done:
	case <-ctx.Done():
		return State{}, ctx.Err()
	case <-time.After(5 * time.Minute):
		return State{}, fmt.Errorf("no translation after 5 minutes")
	}
	s := store.Get()
	for name, as := range map[string]reactive.AgentState[Config]{"summarizer": s.Agents.Summarizer, "translator": s.Agents.Translator} {
		if as.LastError != "" {
			return s, fmt.Errorf("the %s stopped: %s", name, as.LastError)
		}
	}
	return s, nil
}
