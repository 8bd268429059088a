package workflow_test

import (
	"context"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/workflow"
)

// The workflow runs' controls by name, through the runtime's one surface,
// as a process without the workflow's definition (calf runs) makes them.

func workflowView(v agent.RunView, err error) (*workflow.RunInfo, error) {
	info, _ := v.(*workflow.RunInfo)
	return info, err
}

func workflowRef(wf, id string) agent.RunRef {
	return agent.RunRef{Kind: "workflow", Name: wf, RunID: id}
}

func pauseWorkflowRun(ctx context.Context, rt *agent.Runtime, wf, id, reason string) (*workflow.RunInfo, error) {
	rt.AddKind(workflow.Kind)
	return workflowView(rt.Pause(ctx, workflowRef(wf, id), reason))
}

func resumeWorkflowRun(ctx context.Context, rt *agent.Runtime, wf, id string) (*workflow.RunInfo, error) {
	rt.AddKind(workflow.Kind)
	return workflowView(rt.Resume(ctx, workflowRef(wf, id)))
}

func cancelWorkflowRun(ctx context.Context, rt *agent.Runtime, wf, id, reason string) (*workflow.RunInfo, error) {
	rt.AddKind(workflow.Kind)
	return workflowView(rt.Cancel(ctx, workflowRef(wf, id), reason))
}
