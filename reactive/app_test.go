package reactive_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/internal/testwait"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/reactive"
	"github.com/calf-go/calf/store"
	storemem "github.com/calf-go/calf/store/memory"
	"github.com/calf-go/calf/store/storetest"
)

type agentConfig struct {
	Style string `json:"style"`
}

type chainAgents struct {
	Summarizer reactive.AgentState[agentConfig] `json:"summarizer"`
	Translator reactive.AgentState[agentConfig] `json:"translator"`
}

type chainState struct {
	Document    string      `json:"document"`
	Summary     string      `json:"summary"`
	Translation string      `json:"translation"`
	Agents      chainAgents `json:"agents"`
}

func chainActions() *reactive.Actions[chainState] {
	a := &reactive.Actions[chainState]{}
	reactive.MustAction(a, "add_document", func(s chainState, text string) (chainState, []string, error) {
		s.Document = text
		return s, []string{"document"}, nil
	})
	reactive.MustAction(a, "set_summary", func(s chainState, text string) (chainState, []string, error) {
		s.Summary = text
		s.Agents.Summarizer.ShouldAct = false
		return s, []string{"summary", "agents.summarizer.should_act"}, nil
	})
	reactive.MustAction(a, "set_translation", func(s chainState, text string) (chainState, []string, error) {
		if !strings.HasPrefix(text, "fr:") {
			return s, nil, nil
		}
		s.Translation = text
		s.Agents.Translator.ShouldAct = false
		return s, []string{"translation", "agents.translator.should_act"}, nil
	})
	return a
}

func initialChain() chainState {
	return chainState{Agents: chainAgents{
		Summarizer: reactive.NewAgentState(agentConfig{Style: "short"}, "set_summary"),
		Translator: reactive.NewAgentState(agentConfig{Style: "french"}, "set_translation"),
	}}
}

// rules: a new document wakes the summarizer, a summary the translator.
func chainRules() []reactive.Rule[chainState] {
	return []reactive.Rule[chainState]{
		func(s chainState, d *reactive.Delta) []reactive.Dispatch {
			if d.Changed("document") && s.Document != "" {
				return []reactive.Dispatch{{Action: "summarizer.act", Payload: true}}
			}
			return nil
		},
		func(s chainState, d *reactive.Delta) []reactive.Dispatch {
			if d.Changed("summary") && s.Summary != "" {
				return []reactive.Dispatch{{Action: "translator.act", Payload: true}}
			}
			return nil
		},
	}
}

// choose answers with a choice, as a model's JSON.
func choose(action string, payload any) *model.Response {
	raw, _ := json.Marshal(reactive.Choice{Action: action, Payload: payload})
	return modeltest.Text(string(raw))
}

// lastLine is the context line the agents' prompts start with.
func contextOf(req *model.Request) string {
	for _, m := range req.Messages {
		if m.Role == model.RoleUser {
			line, _, _ := strings.Cut(m.Text(), "\n")
			return line
		}
	}
	return ""
}

type chainEnv struct {
	rt    *agent.Runtime
	store *reactive.Store[chainState]
}

func newChainEnv(t *testing.T) *chainEnv {
	t.Helper()
	b := memory.New(nil)
	c := calf.NewClient(b, nil)
	st := storemem.New()
	t.Cleanup(func() { _ = c.Close(); _ = b.Close(); _ = st.Close() })
	s, err := reactive.NewStore("chain", initialChain(), chainActions(), &reactive.Options{State: st, Client: c})
	if err != nil {
		t.Fatal(err)
	}
	return &chainEnv{rt: agent.NewRuntime(c, st, nil), store: s}
}

func (e *chainEnv) wait(t *testing.T, what string, ok func(chainState) bool) chainState {
	t.Helper()
	var s chainState
	testwait.ForErr(t, 20*time.Second, what, func() error {
		if err := e.store.Refresh(t.Context()); err != nil {
			return err
		}
		if s = e.store.Get(); !ok(s) {
			return fmt.Errorf("state %+v", s)
		}
		return nil
	})
	return s
}

func summarizerAgent(m model.Model) *reactive.Agent[chainState, agentConfig] {
	return &reactive.Agent[chainState, agentConfig]{
		Name: "summarizer", Path: "agents.summarizer", Model: m,
		StaticContext: "You summarize documents.",
		Context:       func(s chainState, c agentConfig) string { return "Summarize (" + c.Style + "): " + s.Document },
	}
}

func translatorAgent(m model.Model) *reactive.Agent[chainState, agentConfig] {
	return &reactive.Agent[chainState, agentConfig]{
		Name: "translator", Path: "agents.translator", Model: m,
		StaticContext: "You translate summaries.",
		Context:       func(s chainState, c agentConfig) string { return "Translate (" + c.Style + "): " + s.Summary },
	}
}

// The summarizer → translator chain: a document wakes the summarizer
// through a rule, its summary wakes the translator; each acts once and
// sets its should_act back.
func TestStateTriggeredChain(t *testing.T) {
	e := newChainEnv(t)
	var sumCalls, trCalls atomic.Int64
	sum := summarizerAgent(modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
		sumCalls.Add(1)
		doc := strings.TrimPrefix(contextOf(req), "Summarize (short): ")
		return choose("set_summary", "short: "+doc), nil
	}))
	tr := translatorAgent(modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
		trCalls.Add(1)
		return choose("set_translation", "fr: "+strings.TrimPrefix(contextOf(req), "Translate (french): ")), nil
	}))
	app, err := reactive.NewApp(e.store, []reactive.AppAgent[chainState]{sum, tr}, chainRules()...)
	if err != nil {
		t.Fatal(err)
	}
	if err := app.Serve(t.Context(), e.rt); err != nil {
		t.Fatal(err)
	}
	mustDispatch(t, e.store, "add_document", "cats sleep a lot")
	s := e.wait(t, "the translation", func(s chainState) bool { return s.Translation != "" })
	if s.Summary != "short: cats sleep a lot" || s.Translation != "fr: short: cats sleep a lot" {
		t.Errorf("state %+v", s)
	}
	if s.Agents.Summarizer.ShouldAct || s.Agents.Translator.ShouldAct || sumCalls.Load() != 1 || trCalls.Load() != 1 {
		t.Errorf("should_act %t/%t after %d and %d model calls", s.Agents.Summarizer.ShouldAct, s.Agents.Translator.ShouldAct, sumCalls.Load(), trCalls.Load())
	}
}

// An unknown action, an unavailable one and malformed JSON: the agent
// tells the model and goes on; an agent that keeps answering wrong stops
// with should_act false and a reason.
func TestStateAgentBadAnswers(t *testing.T) {
	e := newChainEnv(t)
	var mu sync.Mutex
	var seen []string
	answers := []func() *model.Response{
		func() *model.Response { return choose("launch_rockets", nil) },
		func() *model.Response { return choose("set_translation", "fr: sneaky") },
		func() *model.Response { return modeltest.Text("I think the summary is nice") },
		func() *model.Response { return choose("set_summary", "finally") },
	}
	n := 0
	sum := summarizerAgent(modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, req.Messages[len(req.Messages)-1].Text())
		if n >= len(answers) {
			return choose("set_summary", "finally"), nil
		}
		n++
		return answers[n-1](), nil
	}))
	app, err := reactive.NewApp(e.store, []reactive.AppAgent[chainState]{sum})
	if err != nil {
		t.Fatal(err)
	}
	if err := app.Serve(t.Context(), e.rt); err != nil {
		t.Fatal(err)
	}
	mustDispatch(t, e.store, "summarizer.act", true)
	s := e.wait(t, "the summary", func(s chainState) bool { return s.Summary != "" })
	if s.Summary != "finally" || s.Translation != "" || s.Agents.Summarizer.ShouldAct {
		t.Errorf("state %+v", s)
	}
	mu.Lock()
	all := strings.Join(seen, "\n---\n")
	mu.Unlock()
	for _, want := range []string{`"launch_rockets" is not an action`, `"set_translation" is not available now`, "not valid output"} {
		if !strings.Contains(all, want) {
			t.Errorf("the model was not told %q; it saw:\n%s", want, all)
		}
	}

	// Always wrong: it stops after MaxRetries answers in all.
	e2 := newChainEnv(t)
	var calls atomic.Int64
	stubborn := summarizerAgent(modeltest.FunctionModel(func(context.Context, *model.Request) (*model.Response, error) {
		calls.Add(1)
		return choose("launch_rockets", nil), nil
	}))
	stubborn.MaxRetries = 2
	app2, err := reactive.NewApp(e2.store, []reactive.AppAgent[chainState]{stubborn})
	if err != nil {
		t.Fatal(err)
	}
	if err := app2.Serve(t.Context(), e2.rt); err != nil {
		t.Fatal(err)
	}
	mustDispatch(t, e2.store, "summarizer.act", true)
	s = e2.wait(t, "the stop", func(s chainState) bool { return s.Agents.Summarizer.LastError != "" })
	if s.Agents.Summarizer.ShouldAct || !strings.Contains(s.Agents.Summarizer.LastError, "2 answers") {
		t.Errorf("after the retries: %+v", s.Agents.Summarizer)
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("%d model calls with MaxRetries 2; want 2", n)
	}
}

// Setting should_act again while the agent acts triggers nothing more.
func TestStateAgentDebounce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newChainEnv(t)
		started, release := make(chan struct{}, 1), make(chan struct{})
		var calls atomic.Int64
		sum := summarizerAgent(modeltest.FunctionModel(func(ctx context.Context, _ *model.Request) (*model.Response, error) {
			if calls.Add(1) == 1 {
				started <- struct{}{}
				<-release
			}
			return choose("set_summary", "once"), nil
		}))
		app, err := reactive.NewApp(e.store, []reactive.AppAgent[chainState]{sum})
		if err != nil {
			t.Fatal(err)
		}
		if err := app.Serve(t.Context(), e.rt); err != nil {
			t.Fatal(err)
		}
		mustDispatch(t, e.store, "summarizer.act", true)
		<-started
		if d := mustDispatch(t, e.store, "summarizer.act", true); d != nil {
			t.Errorf("setting should_act again changed the state: %+v", d)
		}
		close(release)
		e.wait(t, "the summary", func(s chainState) bool { return s.Summary == "once" && !s.Agents.Summarizer.ShouldAct })
		// Once every goroutine of the bubble is blocked, a second trigger
		// would have called the model.
		synctest.Wait()
		if calls.Load() != 1 {
			t.Errorf("%d model calls; want one activation", calls.Load())
		}
	})
}

// An app whose agents name missing actions or a wrong path is refused,
// with every problem listed.
func TestAppValidation(t *testing.T) {
	e := newChainEnv(t)
	bad := initialChain()
	bad.Agents.Summarizer.AvailableActions = []string{"set_summary", "delete_everything", "format_disk"}
	s, err := reactive.NewStore("bad", bad, chainActions(), &reactive.Options{Client: e.rt.Client()})
	if err != nil {
		t.Fatal(err)
	}
	lost := summarizerAgent(modeltest.NewTestModel())
	lost.Name, lost.Path = "lost", "agents.nowhere"
	_, err = reactive.NewApp(s, []reactive.AppAgent[chainState]{summarizerAgent(modeltest.NewTestModel()), lost})
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{`"delete_everything" is not an action`, `"format_disk" is not an action`, `nothing at "agents.nowhere"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

// set_available narrows the actions an agent may take now, never beyond
// its available actions.
func TestSetAvailable(t *testing.T) {
	e := newChainEnv(t)
	if _, err := reactive.NewApp(e.store, []reactive.AppAgent[chainState]{summarizerAgent(modeltest.NewTestModel())}); err != nil {
		t.Fatal(err)
	}
	mustDispatch(t, e.store, "summarizer.set_available", []string{})
	if got := e.store.Get().Agents.Summarizer.CurrentlyAvailableActions; len(got) != 0 {
		t.Errorf("currently available %v", got)
	}
	if _, err := e.store.Dispatch(t.Context(), "summarizer.set_available", []string{"set_translation"}); err == nil || !strings.Contains(err.Error(), "may not take") {
		t.Errorf("beyond the available actions: %v", err)
	}
	mustDispatch(t, e.store, "summarizer.set_available", []string{"set_summary"})
	if got := e.store.Get().Agents.Summarizer.CurrentlyAvailableActions; len(got) != 1 || got[0] != "set_summary" {
		t.Errorf("currently available %v", got)
	}
}

// handledBroker tells when the handlers of one consumer group have
// handled a message: for an agent's trigger group, when the activation a
// delta started has ended.
type handledBroker struct {
	calf.Broker
	group string

	mu   sync.Mutex
	done map[string]chan struct{}
}

func (b *handledBroker) Unwrap() calf.Broker { return b.Broker }

func (b *handledBroker) Subscribe(ctx context.Context, pattern string, h calf.Handler, opts *calf.SubscribeOptions) (calf.Subscription, error) {
	if opts != nil && opts.Group == b.group {
		inner := h
		h = func(ctx context.Context, msg *calf.Message) error {
			err := inner(ctx, msg)
			if err == nil {
				ch := b.handled(msg.ID)
				b.mu.Lock()
				select {
				case <-ch:
				default:
					close(ch)
				}
				b.mu.Unlock()
			}
			return err
		}
	}
	return b.Broker.Subscribe(ctx, pattern, h, opts)
}

// handled returns a channel closed once the message id is handled.
func (b *handledBroker) handled(id string) chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done == nil {
		b.done = map[string]chan struct{}{}
	}
	ch, ok := b.done[id]
	if !ok {
		ch = make(chan struct{})
		b.done[id] = ch
	}
	return ch
}

// waitHandled waits until the handler of the delta of version v returned.
func (b *handledBroker) waitHandled(t *testing.T, v int64) {
	t.Helper()
	select {
	case <-b.handled("chain.delta." + strconv.FormatInt(v, 10)):
	case <-time.After(20 * time.Second):
		t.Fatalf("the delta of version %d was not handled", v)
	}
}

// newTriggerEnv is a chain whose summarizer's trigger handler tells when
// it has handled each delta; wrap, when set, wraps the state store of the
// reactive store (the runtime keeps the plain one).
func newTriggerEnv(t *testing.T, wrap func(store.Store) store.Store) (*chainEnv, *handledBroker) {
	t.Helper()
	mem := memory.New(nil)
	b := &handledBroker{Broker: mem, group: reactive.TriggerGroup("chain", "summarizer")}
	c := calf.NewClient(b, nil)
	st := storemem.New()
	t.Cleanup(func() { _ = c.Close(); _ = mem.Close(); _ = st.Close() })
	var rst store.Store = st
	if wrap != nil {
		rst = wrap(st)
	}
	s, err := reactive.NewStore("chain", initialChain(), chainActions(), &reactive.Options{State: rst, Client: c})
	if err != nil {
		t.Fatal(err)
	}
	return &chainEnv{rt: agent.NewRuntime(c, st, nil), store: s}, b
}

// An answer that comes after should_act was turned off is dropped: the
// agent reads the state again once its model has answered.
func TestStateAgentDropsAnswerAfterShouldActOff(t *testing.T) {
	e, b := newTriggerEnv(t, nil)
	started, release := make(chan struct{}, 1), make(chan struct{})
	var calls atomic.Int64
	sum := summarizerAgent(modeltest.FunctionModel(func(ctx context.Context, _ *model.Request) (*model.Response, error) {
		if calls.Add(1) == 1 {
			started <- struct{}{}
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return choose("set_summary", "late"), nil
		}
		return choose("set_summary", "again"), nil
	}))
	app, err := reactive.NewApp(e.store, []reactive.AppAgent[chainState]{sum})
	if err != nil {
		t.Fatal(err)
	}
	if err := app.Serve(t.Context(), e.rt); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var summaries []string
	e.store.Subscribe("summary", func(d *reactive.Delta) {
		mu.Lock()
		summaries = append(summaries, string(d.After["summary"]))
		mu.Unlock()
	})
	on := mustDispatch(t, e.store, "summarizer.act", true)
	<-started
	mustDispatch(t, e.store, "summarizer.act", false)
	close(release)
	b.waitHandled(t, on.Version) // the activation has ended
	if err := e.store.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if s := e.store.Get(); s.Summary != "" || s.Agents.Summarizer.ShouldAct || s.Agents.Summarizer.LastError != "" {
		t.Errorf("the answer that came after should_act was turned off was acted on: %+v", s)
	}
	// Turned on again, it acts.
	mustDispatch(t, e.store, "summarizer.act", true)
	e.wait(t, "the summary", func(s chainState) bool { return s.Summary != "" })
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(summaries, []string{`"again"`}) || calls.Load() != 2 {
		t.Errorf("summaries %v after %d model calls; want only the second answer's", summaries, calls.Load())
	}
}

// should_act turned off between the agent's second reading of the state
// and its dispatch: the dispatch finds it off (it is conditional on the
// state it writes) and the action is dropped.
func TestStateAgentDropsAnswerOnConcurrentStop(t *testing.T) {
	var armed atomic.Bool
	var stopper *reactive.Store[chainState]
	var inner store.Store
	e, b := newTriggerEnv(t, func(st store.Store) store.Store {
		inner = st
		return storetest.WithFaults(st, storetest.Faults{Inject: func(c storetest.Call) storetest.Fault {
			if c.Op == storetest.OpPut && c.Kind == reactive.KindState && armed.CompareAndSwap(true, false) {
				// Another writer turns should_act off first.
				if _, err := stopper.Dispatch(context.Background(), "summarizer.act", false); err != nil {
					t.Error(err)
				}
			}
			return storetest.NoFault
		}})
	})
	sum := summarizerAgent(modeltest.FunctionModel(func(context.Context, *model.Request) (*model.Response, error) {
		armed.Store(true) // the next write of the state is the agent's action
		return choose("set_summary", "late"), nil
	}))
	app, err := reactive.NewApp(e.store, []reactive.AppAgent[chainState]{sum})
	if err != nil {
		t.Fatal(err)
	}
	if stopper, err = reactive.NewStore("chain", initialChain(), e.store.Actions(), &reactive.Options{State: inner}); err != nil {
		t.Fatal(err)
	}
	if err := app.Serve(t.Context(), e.rt); err != nil {
		t.Fatal(err)
	}
	on := mustDispatch(t, e.store, "summarizer.act", true)
	b.waitHandled(t, on.Version)
	if err := e.store.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if s := e.store.Get(); s.Summary != "" || s.Agents.Summarizer.ShouldAct || armed.Load() {
		t.Errorf("the action was dispatched although should_act was off when it was written: %+v (armed %t)", s, armed.Load())
	}
}
