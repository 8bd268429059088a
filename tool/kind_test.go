package tool_test

import (
	"context"
	"testing"

	"github.com/calf-go/calf/tool"
)

func TestKindOf(t *testing.T) {
	echo, err := tool.New("echo", "Echo.", func(_ context.Context, in struct {
		S string `json:"s"`
	}) (string, error) {
		return in.S, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if k := tool.KindOf(echo); k != tool.KindExecute {
		t.Errorf("an unclassified tool is %q, want %q", k, tool.KindExecute)
	}
	for _, k := range []tool.Kind{tool.KindRead, tool.KindEdit, tool.KindExecute, tool.KindNetwork} {
		c := tool.Classify(echo, k)
		if got := tool.KindOf(c); got != k {
			t.Errorf("KindOf(Classify(%q)) = %q", k, got)
		}
		if c.Definition().Name != "echo" {
			t.Errorf("Classify changed the definition: %+v", c.Definition())
		}
		res, err := c.Call(t.Context(), []byte(`{"s":"hi"}`))
		if err != nil || res.Text() != "hi" {
			t.Errorf("Classify(%q).Call = %+v, %v", k, res, err)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("Classify with an unknown kind did not panic")
		}
	}()
	tool.Classify(echo, "delete")
}
