package team_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/agent/approval"
	"github.com/calf-go/calf/internal/testwait"
	"github.com/calf-go/calf/team"
	"github.com/calf-go/calf/tool"
)

// A cancelled team run's member requests end with it, a member's own and
// a member's subagent's: none is listed pending, each is stored
// cancelled, and answering one is refused with ErrRunEnded.
func TestMemberApprovalsEndWithCancelledTeamRun(t *testing.T) {
	for _, tt := range []struct {
		name  string
		build func(e *env) (team.Member, func() int64)
	}{
		{"member", func(e *env) (team.Member, func() int64) {
			ops, deploys := actor(t, e, "ops", "deploy")
			return team.AgentMember(ops), deploys.Load
		}},
		{"member's subagent", func(e *env) (team.Member, func() int64) {
			helper, adds := actor(t, e, "helper", "add")
			lead, _ := actor(t, e, "lead", "add", tool.Must(agent.AsTool(helper, nil)))
			return team.AgentMember(lead), adds.Load
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nil)
			member, ran := tt.build(e)
			tm := serve(t, e, team.Must(team.NewSequential("release", []team.Member{member}, nil)))
			if _, err := tm.Submit(t.Context(), e.rt, "v2", &team.RunOptions{RunID: "rel"}); err != nil {
				t.Fatal(err)
			}
			var reqs []approval.Approval
			testwait.ForErr(t, 10*time.Second, "a request under the team run", func() (err error) {
				reqs, err = approval.List(t.Context(), e.rt.Store(), "rel", approval.Pending)
				if err == nil && len(reqs) == 0 {
					err = errors.New("none pending")
				}
				return err
			})
			if err := tm.Cancel(t.Context(), e.rt, "rel", "release called off"); err != nil {
				t.Fatal(err)
			}
			if p, err := approval.List(t.Context(), e.rt.Store(), "rel", approval.Pending); err != nil || len(p) != 0 {
				t.Errorf("pending requests of the cancelled team run: %+v, %v", p, err)
			}
			stored, err := approval.Get(t.Context(), e.rt.Store(), reqs[0].ID)
			if err != nil || stored.Status != approval.Cancelled || !strings.Contains(stored.Message, "was cancelled") {
				t.Errorf("stored request: %+v, %v", stored, err)
			}
			if _, err := approval.Respond(t.Context(), e.rt.Store(), e.rt.Client(), reqs[0].ID, approval.Answer{Approve: true, Digest: reqs[0].Digest}); !errors.Is(err, approval.ErrRunEnded) {
				t.Errorf("answer: %v, want ErrRunEnded", err)
			}
			if err := e.broker.Drain(t.Context()); err != nil {
				t.Fatal(err)
			}
			if n := ran(); n != 0 {
				t.Errorf("the tool ran %d times", n)
			}
		})
	}
}
