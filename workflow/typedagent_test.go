package workflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/workflow"
)

type order struct {
	Item  string  `json:"item"`
	Qty   int     `json:"qty"`
	Price float64 `json:"price"`
}

type quote struct {
	Total float64 `json:"total"`
	Note  string  `json:"note"`
}

type shop struct {
	Order order `json:"order"`
	Quote quote `json:"quote"`
}

// A typed agent node gives the agent its input as the JSON of a typed
// value, and takes its structured output back into the state.
func TestTypedAgentNode(t *testing.T) {
	rt := newRuntime(t)
	var got order
	quoter := agent.Must(agent.NewTyped[quote]("quoter", modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
		text := req.Messages[len(req.Messages)-1].Text()
		dec := json.NewDecoder(strings.NewReader(text))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&got); err != nil {
			return nil, err
		}
		out, _ := json.Marshal(quote{Total: float64(got.Qty) * got.Price, Note: "for " + got.Item})
		return modeltest.Text(string(out)), nil
	}), &agent.Options{Instructions: "You get an order as JSON and answer with its quote.", MaxRepairs: -1}))
	if err := quoter.Serve(t.Context(), rt, nil); err != nil {
		t.Fatal(err)
	}
	w := workflow.New[shop]("shop", nil).
		Node("quote", workflow.TypedAgentNode(quoter,
			func(s shop) (order, error) {
				o := s.Order
				if o.Qty == 0 { // an input that does not encode, for the test
					o.Price = math.Inf(1)
				}
				return o, nil
			},
			func(s shop, q quote) (shop, error) { s.Quote = q; return s, nil })).
		Edge(workflow.Start, "quote").
		Edge("quote", workflow.End).
		MustBuild()
	serve(t, w, rt)
	final, err := w.Run(t.Context(), rt, shop{Order: order{Item: "tea", Qty: 3, Price: 2.5}}, &workflow.RunOptions{RunID: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	if got != (order{Item: "tea", Qty: 3, Price: 2.5}) {
		t.Errorf("the agent's input decoded to %+v", got)
	}
	if final.Quote != (quote{Total: 7.5, Note: "for tea"}) {
		t.Errorf("state %+v", final)
	}

	// An input that does not encode fails the run with an error naming
	// the node and the agent; the agent is not called.
	_, err = w.Run(t.Context(), rt, shop{Order: order{Item: "tea"}}, &workflow.RunOptions{RunID: "s2"})
	if got.Qty != 3 {
		t.Errorf("the agent was called again: %+v", got)
	}
	if !errors.Is(err, agent.ErrRunFailed) || !strings.Contains(err.Error(), `"quote"`) || !strings.Contains(err.Error(), "the input of agent quoter does not encode as JSON") {
		t.Fatalf("err = %v", err)
	}
}
