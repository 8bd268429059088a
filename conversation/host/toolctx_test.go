package host_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/conversation/host"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/model/tokens"
	storemem "github.com/calf-go/calf/store/memory"
)

// planModel is a conversational agent that answers each user message
// (by its text) with the tool calls of its plan, one per model call, then
// the answer; it records the messages of every request.
type planModel struct {
	mu       sync.Mutex
	requests [][]model.Message
}

type planStep struct {
	tool string
	args any
}

var plans = map[string]struct {
	steps  []planStep
	answer string
}{
	"Create a docmem called project-notes with a section on decisions": {
		steps: []planStep{
			{"start_conversation", map[string]any{"prototype": "docmem-agent"}},
			{"send", map[string]any{"agent": "docmem-agent", "command": []string{"docmem-create", "project-notes", "Project notes"}}},
			{"send", map[string]any{"agent": "docmem-agent", "command": []string{"docmem-append", "project-notes", "root", "Decisions", "decisions"}}},
			{"send", map[string]any{"agent": "docmem-agent", "command": []string{"docmem-append", "project-notes", "decisions", "We keep the user's context apart from the tool traffic."}}},
		},
		answer: "I've created the docmem 'project-notes' with a section on decisions.",
	},
	"What does it say?": {
		steps: []planStep{
			{"send", map[string]any{"agent": "docmem-agent", "command": []string{"docmem-read", "project-notes"}}},
		},
		answer: "It has one section, Decisions: we keep the user's context apart from the tool traffic.",
	},
}

func (p *planModel) model() modeltest.FunctionModel {
	return func(_ context.Context, req *model.Request) (*model.Response, error) {
		p.mu.Lock()
		p.requests = append(p.requests, model.CloneMessages(req.Messages))
		p.mu.Unlock()
		// The turn is the last user message; its calls so far, the
		// assistant's calls after it.
		turn, done := "", 0
		for _, m := range req.Messages {
			switch {
			case m.Role == model.RoleUser:
				turn, done = m.Text(), 0
			case m.Role == model.RoleTool && strings.HasPrefix(m.Text(), "error"):
				return nil, fmt.Errorf("tool error: %s", m.Text())
			case len(m.ToolCalls) > 0:
				done += len(m.ToolCalls)
			}
		}
		plan, ok := plans[turn]
		if !ok {
			return nil, fmt.Errorf("no plan for %q", turn)
		}
		if done < len(plan.steps) {
			s := plan.steps[done]
			args, _ := json.Marshal(s.args)
			return modeltest.ToolCalls(modeltest.Call(fmt.Sprintf("call_%d", done), s.tool, string(args))), nil
		}
		return modeltest.Text(plan.answer), nil
	}
}

// TestHostTwoContexts: the conversational agent starts the docmem agent
// and sends it commands in turn 1; turn 2's first model request holds the
// user's first message and the answer, and none of turn 1's calls and
// results, which the host's tool context returns. With KeepToolTraffic the
// request holds them; the test logs the tokens the first saves.
func TestHostTwoContexts(t *testing.T) {
	count := tokens.Counter(tokens.O200kBase)
	turn2 := map[bool]int{}
	for _, keep := range []bool{false, true} {
		t.Run(fmt.Sprint("keep=", keep), func(t *testing.T) {
			st := storemem.New()
			p := &planModel{}
			e := newHost(t, memory.New(nil), st, p.model(), &host.Options{KeepToolTraffic: keep})
			c := e.create()
			e.say(c, "Create a docmem called project-notes with a section on decisions")
			e.wait(c, 1)
			p.mu.Lock()
			first := len(p.requests) // turn 1's model calls
			p.mu.Unlock()
			e.say(c, "What does it say?")
			got := e.wait(c, 2)
			if got[1].Message != plans["What does it say?"].answer {
				t.Fatalf("answers %+v", got)
			}
			p.mu.Lock()
			req := p.requests[first]
			p.mu.Unlock()
			var calls, results, n int
			for _, m := range req {
				if len(m.ToolCalls) > 0 {
					calls++
				}
				if m.Role == model.RoleTool {
					results++
				}
				n += count(m)
			}
			turn2[keep] = n
			if keep {
				if calls != 4 || results != 4 {
					t.Fatalf("turn 2's request holds %d calls and %d results, want 4 and 4: %s", calls, results, describe(req))
				}
				return
			}
			if req[0].Role == model.RoleSystem {
				req = req[1:]
			}
			if calls != 0 || results != 0 || len(req) != 3 ||
				req[1].Text() != plans["Create a docmem called project-notes with a section on decisions"].answer {
				t.Fatalf("turn 2's request: %s", describe(req))
			}
			// The tool context: turn 1's four calls and turn 2's read, with
			// their results.
			tc, err := e.host.ToolContext(t.Context(), c.Entry, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(tc) != 5 || tc[0].Tool != "start_conversation" || !strings.Contains(tc[4].Arguments, "docmem-read") ||
				!strings.Contains(tc[4].Result, "Decisions") || tc[4].Status != agent.StatusSuccess {
				t.Fatalf("tool context: %+v", tc)
			}
			if last, err := e.host.ToolContext(t.Context(), c.Entry, 1); err != nil || len(last) != 1 || last[0].Run != tc[4].Run {
				t.Fatalf("the last run's tool context: %+v, %v", last, err)
			}
		})
	}
	if turn2[true] > 0 {
		t.Logf("turn 2's first request: %d tokens with the tool traffic, %d without (%d saved, %.0f%%)",
			turn2[true], turn2[false], turn2[true]-turn2[false], 100*float64(turn2[true]-turn2[false])/float64(turn2[true]))
	}
}

func describe(msgs []model.Message) string {
	var sb strings.Builder
	for _, m := range msgs {
		fmt.Fprintf(&sb, "\n%s %q %d calls", m.Role, m.Text(), len(m.ToolCalls))
	}
	return sb.String()
}
