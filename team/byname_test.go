package team_test

import (
	"context"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/team"
)

// The team runs' controls by name, through the runtime's one surface, as
// a process without the team's definition (calf runs) makes them.

func teamRef(id string) agent.RunRef { return agent.RunRef{Kind: "team", RunID: id} }

func teamView(v agent.RunView, err error) (*team.RunInfo, error) {
	info, _ := v.(*team.RunInfo)
	return info, err
}

func loadTeamRun(ctx context.Context, rt *agent.Runtime, id string) (*team.RunInfo, error) {
	rt.AddKind(team.Kind)
	return teamView(rt.LoadRun(ctx, teamRef(id)))
}

func pauseTeamRun(ctx context.Context, rt *agent.Runtime, id, reason string) (*team.RunInfo, error) {
	rt.AddKind(team.Kind)
	return teamView(rt.Pause(ctx, teamRef(id), reason))
}

func resumeTeamRun(ctx context.Context, rt *agent.Runtime, id string) (*team.RunInfo, error) {
	rt.AddKind(team.Kind)
	return teamView(rt.Resume(ctx, teamRef(id)))
}

func cancelTeamRun(ctx context.Context, rt *agent.Runtime, id, reason string) (*team.RunInfo, error) {
	rt.AddKind(team.Kind)
	return teamView(rt.Cancel(ctx, teamRef(id), reason))
}
