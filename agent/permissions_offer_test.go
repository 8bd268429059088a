package agent_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/tool"
)

// fixedToolset is a toolset of fixed tools.
type fixedToolset struct {
	name  string
	tools []tool.Tool
}

func (s fixedToolset) Name() string                               { return s.name }
func (s fixedToolset) Tools(context.Context) ([]tool.Tool, error) { return s.tools, nil }

// Tools the permissions disallow, the agent's own and its toolsets', are
// left out of the model's request; a call of one the model makes anyway is
// still refused and never runs.
func TestDisallowedToolsAreNotOffered(t *testing.T) {
	newTool := func(name string, runs *int) tool.Tool {
		tl, err := tool.New(name, "A tool.", func(context.Context, struct{}) (string, error) {
			*runs++
			return "ran", nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return tl
	}
	for _, tt := range []struct {
		name      string
		agentPerm *agent.Permissions
		runPerm   *agent.Permissions
		offered   []string
	}{
		{"agent's permissions", &agent.Permissions{Mode: agent.PermissionBypass, Disallowed: []string{"add", "set_*"}}, nil, []string{"peek", "get_x"}},
		{"run's permissions", &agent.Permissions{Mode: agent.PermissionBypass}, &agent.Permissions{Mode: agent.PermissionBypass, Disallowed: []string{"peek|get_*"}}, []string{"add", "set_x"}},
		{"nothing disallowed", &agent.Permissions{Mode: agent.PermissionBypass}, nil, []string{"add", "peek", "set_x", "get_x"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nil)
			var (
				mu      sync.Mutex
				offered [][]string
				runs    int
			)
			m := modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
				mu.Lock()
				defer mu.Unlock()
				var names []string
				for _, d := range req.Tools {
					names = append(names, d.Name)
				}
				offered = append(offered, names)
				if last := req.Messages[len(req.Messages)-1]; last.Role == model.RoleTool {
					return modeltest.Text(last.Text()), nil
				}
				return modeltest.ToolCalls(modeltest.Call("c1", "add", `{}`)), nil // called whether offered or not
			})
			a := serve(t, e, agent.Must(agent.New("perms", m, &agent.Options{
				Tools:       []tool.Tool{newTool("add", &runs), newTool("peek", &runs)},
				Toolsets:    []tool.Toolset{fixedToolset{"more", []tool.Tool{newTool("set_x", &runs), newTool("get_x", &runs)}}},
				Permissions: tt.agentPerm,
			})))
			out, err := a.Run(runCtx(t), e.rt, "go", &agent.RunOptions{Permissions: tt.runPerm})
			if err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			for i, names := range offered {
				if !slices.Equal(names, tt.offered) {
					t.Errorf("model call %d was offered %v, want %v", i, names, tt.offered)
				}
			}
			addOffered := slices.Contains(tt.offered, "add")
			if refused := strings.Contains(out.Output, "refused"); refused == addOffered || (runs == 1) != addOffered {
				t.Errorf("the model's call of add: output %q, %d tool runs", out.Output, runs)
			}
		})
	}
}
