package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/calf-go/calf/examples/internal/extest"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
)

// toolResults returns the texts of the tool results in a request.
func toolResults(req *model.Request) []string {
	var out []string
	for _, m := range req.Messages {
		if m.Role == model.RoleTool {
			out = append(out, m.Text())
		}
	}
	return out
}

// TestResearch runs the example through model/openai, replaying
// testdata/research.httprr: the lead calls the searcher and the analyst as
// tools, the searcher its search tool. The committed cassette was recorded
// against a local OpenAI-compatible server (model/modeltest's) answering
// with the script below; to record it against a real provider instead:
//
//	CALF_RECORD=1 OPENAI_API_KEY=... go test -run '^TestResearch$' ./examples/research
func TestResearch(t *testing.T) {
	// One script for the three agents, answering by system prompt.
	m := extest.Model(t, "testdata/research.httprr", modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
		results := toolResults(req)
		switch req.Messages[0].Text() {
		case leadInstructions:
			switch len(results) {
			case 0:
				return modeltest.ToolCalls(modeltest.Call("c1", "searcher", `{"input":"facts about why cats purr"}`)), nil
			case 1:
				args, _ := json.Marshal(map[string]string{"input": "assess: " + results[0]})
				return modeltest.ToolCalls(modeltest.Call("c2", "analyst", string(args))), nil
			default:
				return modeltest.Text("Report. " + results[1]), nil
			}
		case searcherInstructions:
			if len(results) == 0 {
				return modeltest.ToolCalls(modeltest.Call("s1", "search", `{"query":"cats purr"}`)), nil
			}
			return modeltest.Text(results[0]), nil
		case analystInstructions:
			in := req.Messages[len(req.Messages)-1].Text()
			if !strings.Contains(in, "bone healing") || strings.Contains(in, "Octopuses") {
				t.Errorf("the analyst got %q", in)
			}
			return modeltest.Text("The frequencies are established; the healing effect is uncertain."), nil
		}
		t.Errorf("unexpected system prompt %q", req.Messages[0].Text())
		return modeltest.Text("?"), nil
	}).Generate)
	var log strings.Builder
	report, err := run(t.Context(), m, "Why do cats purr?", &log)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(report, "healing") {
		t.Errorf("report = %q, want the analyst's assessment in it", report)
	}
	// The lead delegates to the searcher, which searches, then to the
	// analyst.
	log2 := log.String()
	prev := -1
	for _, w := range []string{"lead -> searcher ", "searcher -> search ", "searcher answered", "lead -> analyst", "analyst answered"} {
		i := strings.Index(log2, w)
		if i < 0 || i < prev {
			t.Errorf("log lacks %q after the lines before:\n%s", w, log2)
		}
		prev = i
	}
}

func TestSearch(t *testing.T) {
	hits, err := search(context.Background(), searchArgs{Query: "Do lions purr?"})
	if err != nil || len(hits) != 5 {
		t.Errorf("hits = %q, %v", hits, err)
	}
	hits, _ = search(context.Background(), searchArgs{Query: "quantum"})
	if len(hits) != 1 || hits[0] != "nothing found" {
		t.Errorf("hits = %q", hits)
	}
}
