package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/tool"
)

// pickyModel refuses schemas that use anyOf, as a provider with a schema
// dialect of its own may.
type pickyModel struct{ model.Model }

func (pickyModel) CheckSchema(s json.RawMessage) error {
	if strings.Contains(string(s), "anyOf") {
		return errors.New("anyOf is not supported")
	}
	return nil
}

type plainArgs struct {
	A int `json:"a"`
}

// A model's SchemaChecker refuses, when the agent is built, a tool or an
// output type whose schema its provider cannot take.
func TestSchemaCheckerRefusesAtBuild(t *testing.T) {
	m := pickyModel{modeltest.NewTestModel(modeltest.Text("ok"))}
	ok := tool.Must(tool.New("plain", "", func(context.Context, plainArgs) (int, error) { return 0, nil }))
	if _, err := agent.New("fine", m, &agent.Options{Tools: []tool.Tool{ok}}); err != nil {
		t.Fatalf("a schema the model takes: %v", err)
	}
	bad := tool.NewRaw(model.ToolDefinition{Name: "union", Parameters: json.RawMessage(`{"type":"object","properties":{"v":{"anyOf":[{"type":"string"},{"type":"integer"}]}}}`)},
		func(context.Context, json.RawMessage) (*tool.Result, error) { return nil, nil })
	_, err := agent.New("picky", m, &agent.Options{Tools: []tool.Tool{bad}})
	if !errors.Is(err, agent.ErrInvalidAgent) || !strings.Contains(err.Error(), "union") || !strings.Contains(err.Error(), "anyOf is not supported") {
		t.Errorf("a tool the model cannot take: %v; want ErrInvalidAgent naming the tool and the reason", err)
	}
	a := agent.Must(agent.New("later", m, nil))
	if err := a.AddTool(bad); !errors.Is(err, agent.ErrInvalidAgent) {
		t.Errorf("AddTool of a tool the model cannot take: %v; want ErrInvalidAgent", err)
	}
}
