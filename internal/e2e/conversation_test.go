package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/conversation"
	"github.com/calf-go/calf/conversation/docmem"
	"github.com/calf-go/calf/conversation/host"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
)

// conversationEnv, set besides workerEnv, turns a worker process into one
// that serves a conversation host instead of W1's agent; its value is a
// convWorkerConfig as JSON. A test sets it with t.Setenv before it starts
// workers (h.start passes the environment on), so such a test does not
// run in parallel with others.
const conversationEnv = "CALF_E2E_CONVERSATION"

// The crash points of a conversation worker, in the turn CrashTurn.
const (
	// convCrashBeforeAnswer: the conversational agent's model is called
	// for the answer, after the docmem agent answered its append: the
	// worker dies before the model answers.
	convCrashBeforeAnswer = "before_answer"
	// convCrashAfterDocmem: the docmem agent applied the turn's append and
	// its answer is published; the worker dies before the message it
	// answered is acknowledged.
	convCrashAfterDocmem = "after_docmem_answer"
)

// convWorkerConfig says what a conversation worker serves and where it
// dies.
type convWorkerConfig struct {
	// Prefix starts the names of the prototypes, unique to the test:
	// {Prefix}-conv (the conversational agent) and {Prefix}-docmem.
	Prefix string `json:"prefix"`
	// Crash is a crash point (convCrash…) or empty; CrashTurn the user
	// message, "note {CrashTurn}", whose turn it kills. The first worker
	// to reach the point dies (a marker in workerConfig.CrashDir).
	Crash     string `json:"crash,omitempty"`
	CrashTurn int    `json:"crash_turn,omitempty"`
}

func (c *convWorkerConfig) entry() string  { return c.Prefix + "-conv" }
func (c *convWorkerConfig) docmem() string { return c.Prefix + "-docmem" }

// prototypes are the conversational agent, which may start the docmem
// agent, and the docmem agent.
func (c *convWorkerConfig) prototypes() []conversation.Prototype {
	return []conversation.Prototype{
		{Name: c.entry(), Kind: conversation.KindLLM, Role: "Orchestrator", SystemPrompt: "You keep the user's notes.",
			Subagents: []string{c.docmem()}},
		{Name: c.docmem(), Kind: conversation.KindCode, Role: "Tool executor for docmem operations"},
	}
}

// The scripted conversation: the user says "note K"; the conversational
// agent starts the docmem agent, creates the document "notes" in the first
// turn, appends "note K" under its root and answers "noted K".
const (
	convDoc   = "notes"
	convTitle = "Notes"
)

// convTurn returns K of the user's message "note K".
func convTurn(text string) (int, bool) {
	s, ok := strings.CutPrefix(text, "note ")
	if !ok {
		return 0, false
	}
	k, err := strconv.Atoi(s)
	return k, err == nil
}

// convModel is the conversational agent's model, deterministic: the tool
// calls of a turn have ids of their own (start_K, create_K, append_K), so
// that the session's earlier turns do not answer them. It reports each
// call, and kills the process before the answer at convCrashBeforeAnswer.
func convModel(cfg *convWorkerConfig, crashDir string, rep *reporter) modeltest.FunctionModel {
	return func(_ context.Context, req *model.Request) (*model.Response, error) {
		var last string
		for _, m := range slices.Backward(req.Messages) {
			if m.Role == model.RoleUser {
				last = m.Text()
				break
			}
		}
		k, ok := convTurn(last)
		if !ok {
			return nil, fmt.Errorf("the user said %q", last)
		}
		turn := "turn" + strconv.Itoa(k)
		result := func(id string) (string, bool) {
			for _, m := range req.Messages {
				if m.Role == model.RoleTool && m.ToolCallID == id+"_"+strconv.Itoa(k) {
					return m.Text(), true
				}
			}
			return "", false
		}
		call := func(id, name string, args any) (*model.Response, error) {
			rep.report(event{Ev: "model", Run: turn, Point: id})
			raw, _ := json.Marshal(args)
			return modeltest.ToolCalls(modeltest.Call(id+"_"+strconv.Itoa(k), name, string(raw))), nil
		}
		if _, ok := result("start"); !ok {
			return call("start", "start_conversation", map[string]any{"prototype": cfg.docmem()})
		}
		if k == 1 {
			if _, ok := result("create"); !ok {
				return call("create", "send", map[string]any{"agent": cfg.docmem(), "command": []string{"docmem-create", convDoc, convTitle}})
			}
		}
		appended, ok := result("append")
		if !ok {
			return call("append", "send", map[string]any{"agent": cfg.docmem(), "command": []string{"docmem-append", convDoc, docmem.Root, last}})
		}
		rep.report(event{Ev: "model", Run: turn, Point: "answer"})
		if cfg.Crash == convCrashBeforeAnswer && k == cfg.CrashTurn && claimCrash(crashDir, turn, cfg.Crash) {
			rep.crash(turn, cfg.Crash)
		}
		var res docmem.Result
		if err := json.Unmarshal([]byte(appended), &res); err != nil || !res.OK {
			return modeltest.Text("failed: " + appended), nil
		}
		return modeltest.Text("noted " + strconv.Itoa(k)), nil
	}
}

// convBroker kills the process after it publishes the docmem agent's
// answer to the append of the crash turn (convCrashAfterDocmem).
type convBroker struct {
	calf.Broker
	cfg      *convWorkerConfig
	crashDir string
	rep      *reporter
}

func (b *convBroker) Publish(ctx context.Context, msg *calf.Message) error {
	err := b.Broker.Publish(ctx, msg)
	if err != nil || b.cfg.Crash != convCrashAfterDocmem {
		return err
	}
	parts := strings.Split(msg.Channel, ".")
	if len(parts) != 5 || parts[1] != "conv" || !strings.HasPrefix(parts[3], b.cfg.docmem()+"-") {
		return nil
	}
	var m conversation.ConversationMessage
	var res docmem.Result
	if json.Unmarshal(msg.Data, &m) != nil || json.Unmarshal([]byte(m.Message), &res) != nil {
		return nil
	}
	// The crash turn's append: its node is the turn's (n1 holds note 1,
	// and so on, when every append is applied once).
	turn := "turn" + strconv.Itoa(b.cfg.CrashTurn)
	if res.Command == docmem.CmdAppend && res.Node == "n"+strconv.Itoa(b.cfg.CrashTurn) && !res.Duplicate &&
		claimCrash(b.crashDir, turn, b.cfg.Crash) {
		b.rep.crash(turn, b.cfg.Crash)
	}
	return nil
}

func (b *convBroker) Subscribe(ctx context.Context, pattern string, h calf.Handler, opts *calf.SubscribeOptions) (calf.Subscription, error) {
	return b.Broker.Subscribe(ctx, pattern, func(ctx context.Context, msg *calf.Message) error {
		b.rep.report(event{Ev: "handle", Channel: msg.Channel, ID: msg.ID, Attempt: msg.Metadata.Attempt})
		return h(ctx, msg)
	}, opts)
}

// serveConversationWorker is the worker process of a conversation host: it
// serves the host until ctx ends, when its standard input closes.
func serveConversationWorker(ctx context.Context, cfg *workerConfig, ccfg *convWorkerConfig) error {
	rep := &reporter{pid: os.Getpid()}
	b, err := openBroker(ctx, cfg)
	if err != nil {
		return err
	}
	defer b.Close()
	st, err := openStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	client := calf.NewClient(&convBroker{Broker: b, cfg: ccfg, crashDir: cfg.CrashDir, rep: rep}, &calf.Options{Name: calf.ProcessName()})
	rt := agent.NewRuntime(client, st, nil)
	convs := conversation.NewConversations(st, &conversation.Options{Entry: ccfg.entry()})
	dm := docmem.New(st, nil).CodeHandler()
	m := convModel(ccfg, cfg.CrashDir, rep)
	h := host.New(rt, convs, &host.Options{
		Model: func(string) (model.Model, error) { return m, nil },
		Code: map[string]host.CodeHandler{ccfg.docmem(): func(ctx context.Context, req host.CodeRequest) (string, error) {
			out, err := dm(ctx, req)
			if err == nil {
				rep.report(event{Ev: "docmem", ID: req.Message.CorrelationID, Content: out})
			}
			return out, err
		}},
		// The tool call waits for the docmem agent, which a dead worker
		// may hold until its messages go to the other.
		SendTimeout: waitTimeout,
	})
	if err := h.Serve(ctx); err != nil {
		return err
	}
	rep.report(event{Ev: "ready"})
	<-ctx.Done()
	sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer scancel()
	if err := client.Shutdown(sctx); err != nil && !errors.Is(err, calf.ErrClosed) {
		return err
	}
	return nil
}

// A worker serving a conversation host on NATS and PostgreSQL is killed
// with SIGKILL in the middle of a turn (the second of three user messages
// sent at once): after the docmem agent appended the turn's note and
// before the conversational agent's answer, or right after the docmem
// agent published its answer. The other worker continues the
// conversation: every user message, a fourth sent after the crash among
// them, gets exactly one answer on the user's channel, in order; the
// document holds each note once, in order; the conversation has its two
// instances and two topics.
func TestKillConversationWorker(t *testing.T) {
	for _, point := range []string{convCrashBeforeAnswer, convCrashAfterDocmem} {
		t.Run(point, func(t *testing.T) { killConversation(t, point) })
	}
}

// userAnswer is a message on the user's channel, as delivered.
type userAnswer struct {
	id  string
	msg conversation.ConversationMessage
}

func killConversation(t *testing.T, point string) {
	h := newHarness(t)
	cfg := h.config(natsPostgres)
	fastFailover(cfg)
	// A schema of its own in the shared database, dropped at the end.
	schema := "e2e_conv_" + strings.ToLower(cfg.Namespace)
	pgURL := cfg.StoreURL
	cfg.StoreURL = pgURL + "&schema=" + schema
	if !strings.Contains(pgURL, "?") {
		cfg.StoreURL = pgURL + "?schema=" + schema
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if c, err := pgx.Connect(ctx, pgURL); err == nil {
			_, _ = c.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
			_ = c.Close(ctx)
		}
	})
	ccfg := &convWorkerConfig{Prefix: "p" + cfg.Namespace[:8], Crash: point, CrashTurn: 2}

	// The user's side, in this process.
	ctx := t.Context()
	b, err := openBroker(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	st, err := openStore(ctx, cfg)
	if err != nil {
		_ = b.Close()
		t.Fatal(err)
	}
	client := calf.NewClient(b, nil)
	t.Cleanup(func() {
		_ = client.Close()
		_ = b.Close()
		_ = st.Close()
	})
	convs := conversation.NewConversations(st, &conversation.Options{Entry: ccfg.entry()})
	if err := convs.Prototypes().RegisterAll(ctx, ccfg.prototypes(), false); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var answers []userAnswer
	got := make(chan struct{}, 64)
	if err := client.Handle(ctx, "calf.conv.*.*."+conversation.UserParticipant, func(_ context.Context, msg *calf.Message) error {
		m, err := conversation.DecodeMessage(msg.Data)
		if err != nil {
			return calf.Permanent(err)
		}
		mu.Lock()
		answers = append(answers, userAnswer{id: msg.ID, msg: m})
		mu.Unlock()
		got <- struct{}{}
		return nil
	}, &calf.SubscribeOptions{Group: "user-side"}); err != nil {
		t.Fatal(err)
	}

	raw, err := json.Marshal(ccfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(conversationEnv, string(raw))
	workers := []*proc{h.start(cfg), h.start(cfg)}
	for _, p := range workers {
		h.ready(p)
	}

	c, err := convs.Create(ctx, conversation.NewConversation{UserID: "u1", Description: "notes"})
	if err != nil {
		t.Fatal(err)
	}
	ch, err := conversation.Channel(c.ID, conversation.UserParticipant, c.Entry)
	if err != nil {
		t.Fatal(err)
	}
	say := func(k int) {
		m := conversation.ConversationMessage{ConversationID: c.ID, UserID: "u1", Message: "note " + strconv.Itoa(k),
			Timestamp: time.Now().UTC(), CorrelationID: "u" + strconv.Itoa(k)}
		if _, err := client.Emit(ctx, ch, m, calf.WithKey(c.ID), calf.WithID(c.ID+"-note-"+strconv.Itoa(k)),
			calf.WithMetadata(calf.Metadata{CorrelationID: m.CorrelationID})); err != nil {
			t.Fatal(err)
		}
	}
	waitAnswers := func(n int) {
		t.Helper()
		deadline := time.After(waitTimeout)
		for {
			mu.Lock()
			have := len(answers)
			mu.Unlock()
			if have >= n {
				return
			}
			select {
			case <-got:
			case <-deadline:
				h.mu.Lock()
				for _, ev := range h.events {
					t.Logf("%d %s %s %s %s %s %d %.200s", ev.PID, ev.Ev, ev.Run, ev.Point, ev.Channel, ev.ID, ev.Attempt, ev.Content)
				}
				h.mu.Unlock()
				t.Fatalf("%d answers on the user's channel within %s; want %d", have, waitTimeout, n)
			}
		}
	}
	for k := 1; k <= 3; k++ {
		say(k)
	}
	crash := h.waitEvent("crash at "+point, func(ev event) bool { return ev.Ev == "crash" })
	if crash.Point != point || crash.Run != "turn2" {
		t.Fatalf("crash %+v; want %s in turn2", crash, point)
	}
	var dead, alive *proc
	for _, p := range workers {
		if p.pid == crash.PID {
			dead = p
		} else {
			alive = p
		}
	}
	if dead == nil {
		t.Fatalf("the crash %+v is in no worker", crash)
	}
	h.waitExit(dead)
	waitAnswers(3)
	// The conversation goes on after the crash.
	say(4)
	waitAnswers(4)
	// Anything delivered twice would come again from a message delivered
	// and not acknowledged, the dead worker's among them: wait until the
	// stream has none, nor any waiting to be delivered.
	waitStreamSettled(t, cfg)
	h.stopAll()

	mu.Lock()
	defer mu.Unlock()
	var texts []string
	for _, a := range answers {
		texts = append(texts, a.msg.CorrelationID+": "+a.msg.Message)
		if a.msg.AgentID != c.Entry {
			t.Errorf("answer %+v is not from %s", a.msg, c.Entry)
		}
	}
	if want := []string{"u1: noted 1", "u2: noted 2", "u3: noted 3", "u4: noted 4"}; !slices.Equal(texts, want) {
		t.Errorf("the user's channel got %q; want %q, each once", texts, want)
	}

	// The document: each note once, in order.
	res, err := docmem.New(st, nil).Apply(ctx, c.ID, docmem.Command{Command: docmem.CmdOutline, Doc: convDoc})
	if err != nil || !res.OK {
		t.Fatalf("outline: %+v, %v", res, err)
	}
	wantOutline := "- [root] Notes\n  - [n1] note 1\n  - [n2] note 2\n  - [n3] note 3\n  - [n4] note 4"
	if strings.TrimSpace(res.Text) != wantOutline {
		t.Errorf("the document:\n%s\nwant:\n%s", res.Text, wantOutline)
	}
	insts, err := convs.Instances(ctx, c.ID)
	if err != nil || len(insts) != 2 {
		t.Errorf("instances %+v, %v; want the conversational agent and the docmem agent", insts, err)
	}
	topics, err := convs.Topics(ctx, c.ID)
	if err != nil || len(topics) != 2 {
		t.Errorf("topics %+v, %v; want user and the conversational agent, it and the docmem agent", topics, err)
	}

	// What the docmem agent did: each command applied once, the crash
	// turn's append answered again (marked duplicate) when it was
	// delivered again.
	applied := map[string]int{}
	var duplicates int
	h.mu.Lock()
	events := slices.Clone(h.events)
	h.mu.Unlock()
	for _, ev := range events {
		if ev.Ev != "docmem" {
			continue
		}
		var r docmem.Result
		if err := json.Unmarshal([]byte(ev.Content), &r); err != nil {
			t.Fatalf("docmem result %q: %v", ev.Content, err)
		}
		if r.Duplicate {
			duplicates++
			continue
		}
		applied[ev.ID]++
	}
	for id, n := range applied {
		if n != 1 {
			t.Errorf("docmem command %s applied %d times", id, n)
		}
	}
	if len(applied) != 5 {
		t.Errorf("%d docmem commands applied; want 5 (a create, four appends)", len(applied))
	}
	if point == convCrashAfterDocmem && duplicates == 0 {
		t.Error("the docmem agent's answer of the crash turn was not asked again")
	}
	var afterCrash int
	for _, ev := range events {
		if ev.PID == alive.pid && ev.T > crash.T && ev.Ev != "ready" {
			afterCrash++
		}
	}
	if afterCrash == 0 {
		t.Errorf("the surviving worker %d did nothing after the crash", alive.pid)
	}
	t.Logf("worker %d killed at %s; %d docmem answers given again; %d events of worker %d after the crash",
		dead.pid, point, duplicates, afterCrash, alive.pid)
}
