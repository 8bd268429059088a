package tool_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/tool"
)

func TestResultString(t *testing.T) {
	var none *tool.Result
	for _, tt := range []struct {
		r    *tool.Result
		want string
	}{
		{tool.TextResult("5"), "5"},
		{&tool.Result{Parts: []model.Part{model.TextPart("a"), model.TextPart("b")}}, "ab"},
		{&tool.Result{Structured: json.RawMessage(`{"sum":5}`)}, `{"sum":5}`},
		{&tool.Result{Parts: []model.Part{model.TextPart("5")}, Structured: json.RawMessage(`{"sum":5}`)}, "5"},
		{tool.ErrorResult(fmt.Errorf("no such file")), "no such file"},
		{none, ""},
	} {
		if got := fmt.Sprint(tt.r); got != tt.want {
			t.Errorf("Sprint(%#v) = %q, want %q", tt.r, got, tt.want)
		}
	}
}
