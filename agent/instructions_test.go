package agent_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	storemem "github.com/calf-go/calf/store/memory"
)

// An error of Options.InstructionsFunc fails the run with that error,
// before the model is called (a Deps.Of error among them); an outage is
// retried.
func TestInstructionsFuncError(t *testing.T) {
	type shop struct {
		Currency string `json:"currency"`
	}
	var shopDeps agent.Deps[shop]
	var otherDeps agent.Deps[int]
	ctx := t.Context()
	b := memory.New(nil)
	defer b.Close()
	rt := agent.NewRuntime(calf.NewClient(b, nil), storemem.New(), nil)
	var calls, outages atomic.Int64
	m := modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
		calls.Add(1)
		return modeltest.Text(req.Messages[0].Text()), nil
	})
	a := agent.Must(agent.New("shop", m, &agent.Options{
		InstructionsFunc: func(rc agent.RunContext) (string, error) {
			if rc.RunID == "flaky" && outages.Add(1) < 3 {
				return "", calf.Unavailable(errors.New("the catalogue is down"))
			}
			s, err := shopDeps.Of(rc)
			if err != nil {
				return "", err
			}
			return "prices in " + s.Currency, nil
		},
	}))
	if err := a.Serve(ctx, rt, nil); err != nil {
		t.Fatal(err)
	}
	out, err := a.Run(ctx, rt, "hi", &agent.RunOptions{Deps: shopDeps.Value(shop{Currency: "EUR"})})
	if err != nil || out.Output != "prices in EUR" {
		t.Fatalf("run with deps: %+v, %v", out, err)
	}
	_, err = a.Run(ctx, rt, "hi", &agent.RunOptions{Deps: otherDeps.Value(5)})
	var re *agent.RunError
	if !errors.As(err, &re) || !strings.Contains(err.Error(), "instructions: ") || !strings.Contains(err.Error(), "decode the run's dependencies") {
		t.Errorf("run with deps of another type: %v", err)
	}
	if calls.Load() != 1 {
		t.Errorf("the model was called %d times, want once", calls.Load())
	}
	out, err = a.Run(ctx, rt, "hi", &agent.RunOptions{RunID: "flaky", Deps: shopDeps.Value(shop{Currency: "CHF"})})
	if err != nil || out.Output != "prices in CHF" || outages.Load() < 3 {
		t.Errorf("run through an outage: %+v, %v (%d outages)", out, err, outages.Load())
	}
}
