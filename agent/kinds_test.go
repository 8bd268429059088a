package agent_test

import "github.com/calf-go/calf/agent"

// agentInfo returns the view of an agent's run that the runtime's by-name
// controls return.
func agentInfo(v agent.RunView, err error) (*agent.RunInfo, error) {
	info, _ := v.(*agent.RunInfo)
	return info, err
}
