package main

import (
	"context"
	"strings"
	"testing"

	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
)

// lastText answers with the text of the last message, prefixed.
func lastText(prefix string) modeltest.FunctionModel {
	return func(_ context.Context, req *model.Request) (*model.Response, error) {
		return modeltest.Text(prefix + req.Messages[len(req.Messages)-1].Text()), nil
	}
}

func TestTriageToSales(t *testing.T) {
	m := modeltest.NewTestModel(
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
	)
	var log strings.Builder
	answer, err := run(t.Context(), m, "How much would 12 seats cost?", &log)
	if err != nil {
		t.Fatal(err)
	}
	if answer != "[sales] Here is your quote: 12 seats at 100 EUR = 1200 EUR per year" {
		t.Errorf("answer = %q", answer)
	}
	want := "[triage] -> transfer_to_sales({\"context\":\"Wants a price for 12 seats.\"})\n" +
		"[triage] <- Transferred to sales.\n" +
		"[triage] handed off to sales\n" +
		"[sales] -> quote({\"seats\":12})\n" +
		"[sales] <- 12 seats at 100 EUR = 1200 EUR per year\n"
	if log.String() != want {
		t.Errorf("log:\n%s\nwant:\n%s", log.String(), want)
	}
}

// Support sends a pricing question back to triage, which sends it to
// sales: a chain of three handoffs, one answer.
func TestTriageSupportBackToTriage(t *testing.T) {
	m := modeltest.NewTestModel(
		modeltest.ToolCalls(modeltest.Call("t1", "transfer_to_support", `{"context":"Asks about order A-1001 and prices."}`)),
		modeltest.ToolCalls(modeltest.Call("u1", "lookup_order", `{"order_id":"A-1001"}`)),
		modeltest.ToolCalls(modeltest.Call("u2", "transfer_to_triage", `{"context":"Order status given; now wants a price for 3 seats."}`)),
		modeltest.ToolCalls(modeltest.Call("t2", "transfer_to_sales", `{"context":"Wants a price for 3 seats."}`)),
		modeltest.ToolCalls(modeltest.Call("s1", "quote", `{"seats":3}`)),
		lastText("Quote: "),
	)
	var log strings.Builder
	answer, err := run(t.Context(), m, "Where is order A-1001, and how much are 3 more seats?", &log)
	if err != nil {
		t.Fatal(err)
	}
	if answer != "[sales] Quote: 3 seats at 120 EUR = 360 EUR per year" {
		t.Errorf("answer = %q", answer)
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
