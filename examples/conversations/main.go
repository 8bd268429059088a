// Command conversations is the conversation system whole: prototypes read
// from a YAML file (a conversational agent with a docmem agent as its
// subagent), a conversation created for the user, the user's messages
// sent to the conversational agent, and its answers printed. The
// conversational agent starts the docmem agent when a message needs a
// document memory and sends it commands; its user-facing context keeps
// the user's messages and its answers only, and -tools prints the
// commands it sent and the results it got (its tool context).
//
// Each argument is a message; without arguments, each line of the
// standard input is one:
//
//	OPENAI_API_KEY=... go run ./examples/conversations \
//	    "Create a docmem called project-notes with a section on decisions" \
//	    "What does it say?"
//
// By default everything runs in this process, on the in-process broker and
// store (memory://, memory:). The same program runs on NATS and
// PostgreSQL (docs/deploy.md), where the conversation outlives the
// process: -conversation continues it.
//
//	go run ./examples/conversations -broker nats://127.0.0.1:4222 \
//	    -store postgres://calf@127.0.0.1:5432/calf -conversation 0b6f3c3e-8d1a-4c59-9f0e-2a1b3c4d5e6f "What does it say?"
//
// Any OpenAI-compatible server works: set OPENAI_BASE_URL and pass
// -model. Other providers by name: -model anthropic:claude-sonnet-4-5
// (with ANTHROPIC_API_KEY), -model gemini:gemini-2.5-flash
// (GEMINI_API_KEY), -model ollama:llama3.2 (a local Ollama). Every LLM
// prototype of the file runs on that model.
package main

import (
	"bufio"
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/adapters"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/conversation"
	"github.com/calf-go/calf/conversation/docmem"
	"github.com/calf-go/calf/conversation/host"
	"github.com/calf-go/calf/examples/internal/excli"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/store"
)

//go:embed conversations.yaml
var defaultPrototypes []byte

// config is what the command line chooses.
type config struct {
	// Prototypes is the YAML of the prototypes.
	Prototypes []byte
	// Broker and Store are the adapters' URLs.
	Broker, Store string
	// Conversation continues a conversation by id; empty: a new one.
	Conversation string
	// User is the user's id.
	User string
	// Tools prints the tool context of each answer.
	Tools bool
	// Timeout bounds the wait for each answer.
	Timeout time.Duration
}

func main() {
	file := flag.String("agents", "", "the prototypes' YAML file (default: conversations.yaml, embedded)")
	brokerURL := flag.String("broker", "memory://", "the broker: memory://, nats://HOST:PORT, nats+embedded://DIR, kafka://HOST:PORT")
	storeURL := flag.String("store", "memory:", "the state store: memory:, sqlite:PATH, postgres://..., redis://...")
	conv := flag.String("conversation", "", "the id of a conversation to continue (on a durable broker and store)")
	user := flag.String("user", "u1", "the user's id")
	tools := flag.Bool("tools", false, "print the commands the conversational agent sent and the results it got")
	excli.Main("conversations", "", func(ctx context.Context, m model.Model, _ string) (string, error) {
		cfg := config{Prototypes: defaultPrototypes, Broker: *brokerURL, Store: *storeURL,
			Conversation: *conv, User: *user, Tools: *tools, Timeout: 5 * time.Minute}
		if *file != "" {
			data, err := os.ReadFile(*file)
			if err != nil {
				return "", err
			}
			cfg.Prototypes = data
		}
		var in io.Reader = os.Stdin
		if args := flag.Args(); len(args) > 0 {
			in = strings.NewReader(strings.Join(args, "\n"))
		}
		id, err := run(ctx, m, cfg, in, os.Stdout)
		if err != nil {
			return "", err
		}
		return "(conversation " + id + ")", nil
	})
}

// run starts the system on the broker and store cfg names, creates (or
// continues) a conversation, and sends it each line of in as a user's
// message, writing the answers to out. It returns the conversation's id.
func run(ctx context.Context, m model.Model, cfg config, in io.Reader, out io.Writer) (string, error) {
	s, err := start(ctx, m, cfg)
	if err != nil {
		return "", err
	}
	defer s.close()
	lines := bufio.NewScanner(in)
	lines.Buffer(make([]byte, 64*1024), 1024*1024)
	for lines.Scan() {
		text := strings.TrimSpace(lines.Text())
		if text == "" {
			continue
		}
		answer, err := s.say(ctx, text)
		if err != nil {
			return s.conv.ID, err
		}
		fmt.Fprintf(out, "> %s\n%s\n", text, answer)
		if cfg.Tools {
			calls, err := s.host.ToolContext(ctx, s.conv.Entry, 1)
			if err != nil {
				return s.conv.ID, err
			}
			for _, c := range calls {
				fmt.Fprintf(out, "  [%s %s -> %s: %s]\n", c.Tool, c.Arguments, c.Status, c.Result)
			}
		}
	}
	return s.conv.ID, lines.Err()
}

// system is the conversation system of one process: a host serving the
// prototypes, and the user's side of one conversation.
type system struct {
	broker  calf.Broker
	st      store.Store
	client  *calf.Client
	host    *host.Host
	conv    conversation.Conversation
	user    string
	timeout time.Duration
	answers chan conversation.ConversationMessage
}

// start opens the broker and the store, registers the prototypes, serves
// them, and creates the conversation (or finds it, with its id).
func start(ctx context.Context, m model.Model, cfg config) (s *system, err error) {
	protos, err := conversation.Parse(cfg.Prototypes)
	if err != nil {
		return nil, err
	}
	s = &system{user: cfg.User, timeout: cfg.Timeout, answers: make(chan conversation.ConversationMessage, 16)}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	if s.broker, err = adapters.OpenBroker(ctx, cfg.Broker, nil); err != nil {
		return nil, err
	}
	if s.st, err = adapters.OpenStore(ctx, cfg.Store, nil); err != nil {
		return nil, err
	}
	s.client = calf.NewClient(s.broker, nil)
	rt := agent.NewRuntime(s.client, s.st, nil)
	convs := conversation.NewConversations(s.st, nil)
	if err := convs.Prototypes().RegisterAll(ctx, protos, true); err != nil {
		return nil, err
	}
	s.host = host.New(rt, convs, &host.Options{
		Model: func(string) (model.Model, error) { return m, nil },
		Code:  map[string]host.CodeHandler{"docmem-agent": docmem.New(s.st, nil).CodeHandler()},
	})
	if err := s.host.Serve(ctx); err != nil {
		return nil, err
	}
	// Without an id, Create gives the conversation a new one.
	if s.conv, err = convs.Create(ctx, conversation.NewConversation{ID: cfg.Conversation, UserID: cfg.User, Description: "conversations example"}); err != nil {
		return nil, err
	}
	if s.conv.Status != conversation.StatusRunning {
		return nil, fmt.Errorf("conversation %s is %s", s.conv.ID, s.conv.Status)
	}
	// The user's side: the answers of the conversation's entry instance,
	// in a consumer group of this conversation's own.
	err = s.client.Handle(ctx, "calf.conv."+s.conv.ID+".*."+conversation.UserParticipant, func(ctx context.Context, msg *calf.Message) error {
		a, err := conversation.DecodeMessage(msg.Data)
		if err != nil {
			return calf.Permanent(err)
		}
		select {
		case s.answers <- a:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}, &calf.SubscribeOptions{Group: "user-" + s.conv.ID})
	if err != nil {
		return nil, err
	}
	// On a broker inside this process, which lost what the program's
	// previous run left in flight, the messages it left unanswered in a
	// durable store (-store sqlite:PATH) are carried on.
	if calf.IsLocal(s.broker) {
		if _, err := s.host.Recover(ctx); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// say sends the user's message text to the conversational agent and
// returns its answer.
func (s *system) say(ctx context.Context, text string) (string, error) {
	ch, err := conversation.Channel(s.conv.ID, conversation.UserParticipant, s.conv.Entry)
	if err != nil {
		return "", err
	}
	corr := calf.NewID()
	msg := conversation.ConversationMessage{ConversationID: s.conv.ID, UserID: s.user, Message: text,
		Timestamp: time.Now().UTC(), CorrelationID: corr}
	if _, err := s.client.Emit(ctx, ch, msg, calf.WithKey(s.conv.ID)); err != nil {
		return "", err
	}
	timeout := time.NewTimer(s.timeout)
	defer timeout.Stop()
	for {
		select {
		case a := <-s.answers:
			if a.CorrelationID != corr {
				continue // the answer to an earlier message, delivered again
			}
			if a.IsError() {
				return "", errors.New(a.Message)
			}
			return a.Message, nil
		case <-timeout.C:
			return "", fmt.Errorf("no answer within %s", s.timeout)
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
}

// close shuts the client down, letting the handlers finish, then closes
// the store and the broker.
func (s *system) close() {
	if s.client != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = s.client.Shutdown(ctx)
		cancel()
	}
	if s.st != nil {
		_ = s.st.Close()
	}
	if s.broker != nil {
		_ = s.broker.Close()
	}
}
