package gemini

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/calf-go/calf/model"
)

// A conversation begun on another provider and continued on Gemini 3: the
// first function call of each model step of the current turn that has no
// signature of its own goes with SkipSignature, which the API accepts in
// place of one; the model's own signatures, the other calls of a parallel
// step and earlier turns are left as they are. Models of Gemini 2 and
// before, which do not check signatures, and other models (Gemma) get no
// placeholder.
func TestPlaceholderSignature(t *testing.T) {
	const sig = "CssBAb4+9vtA0YNySGDhNbWUekpgT0C4JzfoLAMCUxxSlERp/+=="
	call := func(id, name, provider, signature string) model.ToolCall {
		return model.ToolCall{ID: id, Name: name, Arguments: `{"city":"Paris"}`, Provider: provider, Signature: signature}
	}
	result := func(id, name string) model.Message {
		return model.Message{Role: model.RoleTool, ToolCallID: id, ToolName: name, Parts: []model.Part{model.TextPart(`{"ok":true}`)}}
	}
	msgs := []model.Message{
		model.UserMessage("weather in Paris?"),
		// An earlier turn, from another provider: not checked, unchanged.
		{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{call("toolu_0", "weather", "anthropic", "sig-of-anthropic")}},
		result("toolu_0", "weather"),
		{Role: model.RoleAssistant, Parts: []model.Part{model.TextPart("Sunny.")}},
		model.UserMessage("and the time and the weather in Rome, then book a taxi?"),
		// The current turn: a parallel step from another provider...
		{Role: model.RoleAssistant, Parts: []model.Part{{Type: model.PartThinking, Text: "two at once", Signature: "s", Provider: "anthropic"}},
			ToolCalls: []model.ToolCall{call("toolu_1", "time", "anthropic", "sig-of-anthropic"), call("toolu_2", "weather", "anthropic", "")}},
		result("toolu_1", "time"), result("toolu_2", "weather"),
		// ... a step Gemini signed ...
		{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{call("fc3", "taxi", "gemini", sig)}},
		result("fc3", "taxi"),
		// ... and one the program made up.
		{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{call("", "confirm", "", "")}},
		result("call_x", "confirm"),
	}
	for _, tt := range []struct {
		model       string
		placeholder bool
	}{
		{"gemini-3-pro-preview", true},
		{"gemini-3.1-flash", true},
		{"models/gemini-3-flash-preview", true},
		{"gemini-flash-latest", true},
		{"gemini-2.5-flash", false},
		{"gemma-3-27b-it", false},
	} {
		t.Run(tt.model, func(t *testing.T) {
			f := newFake(t, func(_ int, w http.ResponseWriter, _ *http.Request) { writeJSON(w, 200, textAnswer) })
			m := f.model(t, Options{Model: tt.model})
			if _, err := m.Generate(t.Context(), &model.Request{Messages: msgs}); err != nil {
				t.Fatal(err)
			}
			var sent struct {
				Contents []struct {
					Role  string `json:"role"`
					Parts []struct {
						FunctionCall *struct {
							Name string `json:"name"`
						} `json:"functionCall"`
						ThoughtSignature *string `json:"thoughtSignature"`
					} `json:"parts"`
				} `json:"contents"`
			}
			if err := json.Unmarshal([]byte(f.body(0)), &sent); err != nil {
				t.Fatal(err)
			}
			got := map[string]string{} // call name: signature sent ("-" when absent)
			for i, c := range sent.Contents {
				for _, p := range c.Parts {
					if p.FunctionCall == nil {
						continue
					}
					s := "-"
					if p.ThoughtSignature != nil {
						s = *p.ThoughtSignature
					}
					name := p.FunctionCall.Name
					if i < 4 { // before the last user message
						name += " (earlier turn)"
					}
					got[name] = s
				}
			}
			want := map[string]string{"weather (earlier turn)": "-", "time": "-", "weather": "-", "taxi": sig, "confirm": "-"}
			if tt.placeholder {
				want["time"], want["confirm"] = SkipSignature, SkipSignature
			}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("%s: signature %q, want %q\n%s", k, got[k], v, f.body(0))
				}
			}
		})
	}
}
