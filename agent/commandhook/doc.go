// Package commandhook makes agent hooks that run an external program, so
// that an operator can add a policy without rebuilding the workers:
//
//	policy, err := commandhook.New("policy", agent.HookPreToolUse, "*", []string{"/etc/calf/policy"}, 5*time.Second)
//	opts := &agent.Options{Hooks: []agent.Hook{policy}}
//
// The program reads the [agent.HookInput] as JSON on its standard input
// and answers with an [agent.HookDecision] as JSON on its standard output;
// see [New].
package commandhook
