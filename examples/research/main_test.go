package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

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

func TestResearch(t *testing.T) {
	// One scripted model for the three agents, answering by system prompt.
	m := modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
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
	})
	var log strings.Builder
	report, err := run(t.Context(), m, "Why do cats purr?", &log)
	if err != nil {
		t.Fatal(err)
	}
	if want := "Report. The frequencies are established; the healing effect is uncertain."; report != want {
		t.Errorf("report = %q, want %q", report, want)
	}
	want := []string{
		`lead -> searcher {"input":"facts about why cats purr"}`,
		`searcher -> search {"query":"cats purr"}`,
		"searcher answered (2 model calls)",
		"lead -> analyst",
		"analyst answered (1 model calls)",
	}
	lines := strings.Split(strings.TrimSpace(log.String()), "\n")
	if len(lines) != len(want) {
		t.Fatalf("log = %q", log.String())
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("log line %d = %q, want %q…", i, lines[i], w)
		}
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
