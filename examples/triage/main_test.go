package main

import (
	"context"
	"strings"
	"testing"

	"github.com/calf-go/calf/examples/internal/extest"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
)

// lastText answers with the text of the last message, prefixed.
func lastText(prefix string) modeltest.FunctionModel {
	return func(_ context.Context, req *model.Request) (*model.Response, error) {
		return modeltest.Text(prefix + req.Messages[len(req.Messages)-1].Text()), nil
	}
}

// The tests run the example through model/openai, replaying their
// cassettes in testdata: the conversation of the three agents, handoffs
// and tool calls. The committed cassettes were recorded against a local
// OpenAI-compatible server (model/modeltest's) answering with each test's
// script; to record them against a real provider instead:
//
//	CALF_RECORD=1 OPENAI_API_KEY=... go test ./examples/triage
//
// A change to what the example sends makes the replay fail with the
// difference; record the cassettes again then.

func TestTriageToSales(t *testing.T) {
	m := extest.Model(t, "testdata/to-sales.httprr", modeltest.NewTestModel(
		modeltest.ToolCalls(modeltest.Call("t1", "transfer_to_sales", `{"context":"Wants a price for 12 seats."}`)),
		// sales: it sees the customer's message and triage's context only.
		func(_ context.Context, req *model.Request) (*model.Response, error) {
			for _, msg := range req.Messages {
				if msg.Role == model.RoleTool || len(msg.ToolCalls) > 0 {
					t.Errorf("sales saw triage's tool calls: %+v", msg)
				}
			}
			return modeltest.ToolCalls(modeltest.Call("s1", "quote", `{"seats":12}`)), nil
		},
		lastText("Here is your quote: "),
	).Generate)
	var log strings.Builder
	answer, err := run(t.Context(), m, "How much would 12 seats cost?", &log)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(answer, "[sales] ") || !strings.Contains(strings.ReplaceAll(answer, ",", ""), "1200") {
		t.Errorf("answer = %q, want sales' 1200", answer)
	}
	for _, want := range []string{
		"[triage] -> transfer_to_sales(",
		"[triage] <- Transferred to sales.\n",
		"[triage] handed off to sales\n",
		"[sales] -> quote({\"seats\":12})\n",
		"[sales] <- 12 seats at 100 EUR = 1200 EUR per year\n",
	} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, log.String())
		}
	}
}

// Support sends a pricing question back to triage, which sends it to
// sales: a chain of three handoffs, one answer.
func TestTriageSupportBackToTriage(t *testing.T) {
	m := extest.Model(t, "testdata/support-back-to-triage.httprr", modeltest.NewTestModel(
		modeltest.ToolCalls(modeltest.Call("t1", "transfer_to_support", `{"context":"Asks about order A-1001 and prices."}`)),
		modeltest.ToolCalls(modeltest.Call("u1", "lookup_order", `{"order_id":"A-1001"}`)),
		modeltest.ToolCalls(modeltest.Call("u2", "transfer_to_triage", `{"context":"Order status given; now wants a price for 3 seats."}`)),
		modeltest.ToolCalls(modeltest.Call("t2", "transfer_to_sales", `{"context":"Wants a price for 3 seats."}`)),
		modeltest.ToolCalls(modeltest.Call("s1", "quote", `{"seats":3}`)),
		lastText("Quote: "),
	).Generate)
	var log strings.Builder
	answer, err := run(t.Context(), m, "Where is order A-1001, and how much are 3 more seats?", &log)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(answer, "[sales] ") || !strings.Contains(answer, "360") {
		t.Errorf("answer = %q, want sales' 360", answer)
	}
	for _, want := range []string{
		"[triage] handed off to support\n",
		"[support] <- shipped on 18 November, arriving on 22 November\n",
		"[support] handed off to triage\n",
		"[triage] handed off to sales\n",
	} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, log.String())
		}
	}
}
