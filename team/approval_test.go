package team_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/agent/approval"
	"github.com/calf-go/calf/internal/testwait"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/team"
	"github.com/calf-go/calf/tool"
)

// actor is a served agent whose model calls its one tool, which needs a
// person's approval, and then answers with the tool's result. It returns
// the agent and the number of times the tool ran.
func actor(t *testing.T, e *env, name, toolName string, extra ...tool.Tool) (*agent.Agent[string], *atomic.Int64) {
	t.Helper()
	var runs atomic.Int64
	act := tool.Must(tool.New(toolName, "Do "+toolName+".", func(_ context.Context, in struct {
		What string `json:"what"`
	}) (string, error) {
		runs.Add(1)
		return toolName + " done: " + in.What, nil
	}))
	m := modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == model.RoleTool {
			return modeltest.Text(name + ": " + last.Text()), nil
		}
		if len(extra) > 0 {
			return modeltest.ToolCalls(modeltest.Call("c1", extra[0].Definition().Name, `{"input":"please `+toolName+`"}`)), nil
		}
		return modeltest.ToolCalls(modeltest.Call("c1", toolName, `{"what":"`+last.Text()+`"}`)), nil
	})
	tools := []tool.Tool{act}
	if len(extra) > 0 {
		tools = extra // a lead that only delegates
	}
	a := agent.Must(agent.New(name, m, &agent.Options{
		Description: "the " + name, Tools: tools, Permissions: &agent.Permissions{Mode: agent.PermissionAsk},
	}))
	if err := a.Serve(t.Context(), e.rt, nil); err != nil {
		t.Fatal(err)
	}
	return a, &runs
}

// One approval surface across a team: a member's request and a member's
// subagent's request show once each in the team run's stream, are listed
// under the team run's id, and answering them there completes the run
// with each tool run once.
func TestMemberApprovalsInTeamRunStream(t *testing.T) {
	e := newEnv(t, nil)
	ops, deploys := actor(t, e, "ops", "deploy")
	helper, adds := actor(t, e, "helper", "add")
	lead, _ := actor(t, e, "lead", "add", tool.Must(agent.AsTool(helper, nil)))
	tm := serve(t, e, team.Must(team.NewSequential("release", []team.Member{team.AgentMember(ops), team.AgentMember(lead)}, nil)))

	var seen []string
	var output, runID string
	for ev, err := range tm.RunStream(runCtx(t), e.rt, "v2", nil) {
		if err != nil {
			t.Fatal(err)
		}
		runID = ev.RunID
		switch {
		case ev.Kind == team.EventMember && ev.Agent.Kind == agent.EventApproval:
			a := ev.Agent.Approval
			seen = append(seen, fmt.Sprintf("%d %s %s %s@%s", ev.Step, ev.Member, a.Status, a.ToolName, a.Agent))
			if a.Status != approval.Pending {
				continue
			}
			// The request is listed under the team run, pending.
			listed, err := approval.List(t.Context(), e.rt.Store(), runID, approval.Pending)
			if err != nil || len(listed) != 1 || listed[0].ID != a.ID {
				t.Errorf("pending requests of the team run: %+v, %v", listed, err)
			}
			if _, err := approval.Respond(t.Context(), e.rt.Store(), e.rt.Client(), a.ID, approval.Answer{Approve: true, Digest: a.Digest}); err != nil {
				t.Fatal(err)
			}
		case ev.Kind == team.EventOutput:
			output = string(ev.Output.Content)
		}
	}
	want := []string{
		"1 ops pending deploy@ops", "1 ops approved deploy@ops",
		"2 lead pending add@helper", "2 lead approved add@helper",
	}
	if !slices.Equal(seen, want) {
		t.Errorf("approval events in the team's stream:\n got %q\nwant %q", seen, want)
	}
	if want := `"lead: helper: add done: please add"`; output != want || deploys.Load() != 1 || adds.Load() != 1 {
		t.Errorf("output %s (want %s); deploy ran %d times, add %d", output, want, deploys.Load(), adds.Load())
	}
	all, err := approval.List(t.Context(), e.rt.Store(), runID, "")
	if err != nil || len(all) != 2 || all[0].Status != approval.Approved || all[1].Status != approval.Approved {
		t.Errorf("requests of the team run: %+v, %v", all, err)
	}
	// A run whose id only starts like the team run's is not its own.
	if other, err := approval.List(t.Context(), e.rt.Store(), runID[:len(runID)-1], ""); err != nil || len(other) != 0 {
		t.Errorf("requests of a run whose id is a prefix: %+v, %v", other, err)
	}
}

// A member's request answered from another process while Run waits: the
// caller needs only the team run's id to find it, and a denial reaches the
// member's model.
func TestMemberApprovalAnsweredByTeamRunID(t *testing.T) {
	e := newEnv(t, nil)
	ops, deploys := actor(t, e, "ops", "deploy")
	tm := serve(t, e, team.Must(team.NewSequential("release", []team.Member{team.AgentMember(ops)}, nil)))
	done := make(chan error, 1)
	var out *team.Output
	go func() {
		var err error
		out, err = tm.Run(runCtx(t), e.rt, "v2", &team.RunOptions{RunID: "rel-1"})
		done <- err
	}()
	var pending []approval.Approval
	testwait.ForErr(t, 10*time.Second, "a request under the team run", func() (err error) {
		pending, err = approval.List(t.Context(), e.rt.Store(), "rel-1", approval.Pending)
		if err == nil && len(pending) == 0 {
			err = errors.New("none pending")
		}
		return err
	})
	if _, err := approval.Respond(t.Context(), e.rt.Store(), e.rt.Client(), pending[0].ID, approval.Answer{Approve: false, Message: "not on a Friday", Digest: pending[0].Digest}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.Output, "not on a Friday") || deploys.Load() != 0 {
		t.Errorf("output %q; deploy ran %d times", out.Output, deploys.Load())
	}
}
