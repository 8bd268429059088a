package reactive_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/reactive"
	"github.com/calf-go/calf/store"
	storemem "github.com/calf-go/calf/store/memory"
)

// storedRecord is a record of testdata/records: kind, id and data as an
// earlier version wrote them; see testdata/records/README.md.
type storedRecord struct {
	Kind string          `json:"kind"`
	ID   string          `json:"id"`
	Data json.RawMessage `json:"data"`
}

// storedStore is a memory store holding the records of the fixture name.
func storedStore(t *testing.T, name string) store.Store {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "records", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var recs []storedRecord
	if err := json.Unmarshal(data, &recs); err != nil {
		t.Fatal(err)
	}
	s := storemem.New()
	for _, r := range recs {
		if _, err := s.Put(t.Context(), r.Kind, r.ID, r.Data, 0); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// Reactive states persisted by an earlier version are this version's
// stores' starting points: their state and version as stored, the agents'
// states with their error; a rule's dispatch made before is not made
// again when its delta comes again; and the apps go on from them, the
// stalled summarizer set to act again.
func TestStoredRecords(t *testing.T) {
	ctx := t.Context()
	st := storedStore(t, "states")
	// A process per store: their agents have the same names.
	runtime := func() *agent.Runtime {
		b := memory.New(nil)
		c := calf.NewClient(b, nil)
		t.Cleanup(func() { _ = c.Close(); _ = b.Close() })
		return agent.NewRuntime(c, st, nil)
	}
	rt, rt2 := runtime(), runtime()
	open := func(name string, rt *agent.Runtime) *reactive.Store[chainState] {
		t.Helper()
		s, err := reactive.NewStore(name, initialChain(), chainActions(), &reactive.Options{State: st, Client: rt.Client()})
		if err != nil {
			t.Fatalf("NewStore(%s): %v", name, err)
		}
		return s
	}
	chain, stalled := open("chain", rt), open("stalled", rt2)

	s := chain.Get()
	if chain.Version() != 5 || s.Document != "cats sleep a lot" || s.Summary != "short: cats sleep a lot" || s.Translation != "fr: short: cats sleep a lot" ||
		s.Agents.Summarizer.ShouldAct || s.Agents.Summarizer.InitConfig.Style != "short" || s.Agents.Translator.CurrentConfig.Style != "french" ||
		strings.Join(s.Agents.Translator.AvailableActions, ",") != "set_translation" || strings.Join(s.Agents.Summarizer.CurrentlyAvailableActions, ",") != "set_summary" ||
		s.Agents.Summarizer.LastError != "" {
		t.Errorf("chain at version %d: %+v", chain.Version(), s)
	}
	s = stalled.Get()
	if stalled.Version() != 3 || s.Document != "dogs bark" || s.Summary != "" || s.Agents.Summarizer.ShouldAct ||
		!strings.Contains(s.Agents.Summarizer.LastError, "stopped after 2 answers") || !strings.Contains(s.Agents.Summarizer.LastError, "launch_rockets") {
		t.Errorf("stalled at version %d: %+v", stalled.Version(), s)
	}

	// The apps of this version on the stored states.
	var sumCalls atomic.Int64
	serve := func(store *reactive.Store[chainState], rt *agent.Runtime) {
		t.Helper()
		sum := summarizerAgent(modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
			sumCalls.Add(1)
			return choose("set_summary", "short: "+strings.TrimPrefix(contextOf(req), "Summarize (short): ")), nil
		}))
		tr := translatorAgent(modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
			return choose("set_translation", "fr: "+strings.TrimPrefix(contextOf(req), "Translate (french): ")), nil
		}))
		app, err := reactive.NewApp(store, []reactive.AppAgent[chainState]{sum, tr}, chainRules()...)
		if err != nil {
			t.Fatal(err)
		}
		if err := app.Serve(ctx, rt); err != nil {
			t.Fatal(err)
		}
	}
	serve(chain, rt)
	// The first delta again, as a broker delivering it once more would:
	// its rule's dispatch is among the stored ones, and is not made again.
	first := reactive.Delta{Store: "chain", Action: "add_document", Payload: json.RawMessage(`"cats sleep a lot"`), Paths: []string{"document"}, Version: 1}
	if _, err := rt.Client().Emit(ctx, reactive.DeltaChannel("chain"), first, calf.WithID("chain.delta.1.again"), calf.WithKey("chain")); err != nil {
		t.Fatal(err)
	}
	mustDispatch(t, chain, "add_document", "birds sing")
	e := &chainEnv{rt: rt, store: chain}
	s = e.wait(t, "the new translation", func(s chainState) bool { return s.Translation == "fr: short: birds sing" })
	// add_document, summarizer.act, set_summary, translator.act,
	// set_translation: five versions after the stored five, and one
	// summary.
	if v := chain.Version(); v != 10 || sumCalls.Load() != 1 {
		t.Errorf("chain at version %d after %d summaries; want 10 and 1: the stored dispatch made again?", v, sumCalls.Load())
	}

	// The stalled summarizer, set to act again, summarizes its document.
	serve(stalled, rt2)
	mustDispatch(t, stalled, "summarizer.act", true)
	e = &chainEnv{rt: rt2, store: stalled}
	s = e.wait(t, "the stalled chain's translation", func(s chainState) bool { return s.Translation != "" })
	if s.Summary != "short: dogs bark" || s.Translation != "fr: short: dogs bark" {
		t.Errorf("stalled after the summarizer acted: %+v", s)
	}
}
