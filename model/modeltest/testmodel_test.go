package modeltest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/calf-go/calf/model"
)

func TestTestModelScript(t *testing.T) {
	errBoom := errors.New("boom")
	fn := func(_ context.Context, req *model.Request) (*model.Response, error) {
		return Text("saw " + req.Messages[0].Text()), nil
	}
	m := NewTestModel(Text("one"), errBoom, fn, FunctionModel(fn))

	tests := []struct {
		prompt   string
		wantText string
		wantErr  error
	}{
		{prompt: "a", wantText: "one"},
		{prompt: "b", wantErr: errBoom},
		{prompt: "c", wantText: "saw c"},
		{prompt: "d", wantText: "saw d"},
		{prompt: "e", wantErr: ErrScriptExhausted},
		{prompt: "f", wantErr: ErrScriptExhausted},
	}
	for i, tt := range tests {
		resp, err := m.Generate(t.Context(), &model.Request{Messages: []model.Message{model.UserMessage(tt.prompt)}})
		if tt.wantErr != nil {
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("call %d: err = %v, want %v", i, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if got := resp.Message.Text(); got != tt.wantText {
			t.Errorf("call %d: text = %q, want %q", i, got, tt.wantText)
		}
	}
	if got := m.Calls(); got != len(tests) {
		t.Errorf("Calls() = %d, want %d", got, len(tests))
	}
	var prompts []string
	for _, r := range m.Requests() {
		prompts = append(prompts, r.Messages[0].Text())
	}
	if diff := cmp.Diff([]string{"a", "b", "c", "d", "e", "f"}, prompts); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}

func TestTestModelExhaustedMessage(t *testing.T) {
	m := NewTestModel(Text("a"), Text("b"))
	for range 2 {
		if _, err := m.Generate(t.Context(), &model.Request{}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := m.Generate(t.Context(), &model.Request{})
	if err == nil || err.Error() != "modeltest: script exhausted after 2 calls" {
		t.Fatalf("err = %v, want %q", err, "modeltest: script exhausted after 2 calls")
	}
}

func TestTestModelCancelledContext(t *testing.T) {
	m := NewTestModel(Text("a"))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := m.Generate(ctx, &model.Request{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if m.Calls() != 0 {
		t.Errorf("Calls() = %d after a cancelled call, want 0", m.Calls())
	}
	resp, err := m.Generate(t.Context(), &model.Request{})
	if err != nil || resp.Message.Text() != "a" {
		t.Fatalf("the step was consumed by the cancelled call: %v, %v", resp, err)
	}
}

func TestTestModelCopies(t *testing.T) {
	scripted := Text("hello")
	m := NewTestModel(scripted, scripted)
	temp := 0.5
	req := &model.Request{
		Messages:    []model.Message{{Role: model.RoleUser, Parts: []model.Part{model.ImagePart("image/png", []byte{1, 2, 3})}}},
		Tools:       []model.ToolDefinition{{Name: "t", Parameters: []byte(`{"type":"object"}`)}},
		Output:      &model.OutputSchema{Name: "o", Schema: []byte(`{}`)},
		Temperature: &temp,
	}
	want := cloneRequest(req)

	resp, err := m.Generate(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	// Change everything the caller owns; the record must not change.
	req.Messages[0].Parts[0].Data[0] = 9
	req.Tools[0].Parameters[0] = ' '
	req.Output.Name = "changed"
	temp = 1
	resp.Message.Parts[0].Text = "changed"

	got := m.Requests()
	if diff := cmp.Diff(want, got[0]); diff != "" {
		t.Errorf("recorded request changed with the caller's (-want +got):\n%s", diff)
	}
	got[0].Messages[0].Role = model.RoleSystem
	if m.Requests()[0].Messages[0].Role != model.RoleUser {
		t.Error("Requests returned the record itself, not a copy")
	}
	resp2, err := m.Generate(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp2.Message.Text() != "hello" {
		t.Errorf("second response = %q: changing the first one changed the script", resp2.Message.Text())
	}
}

func TestTestModelStream(t *testing.T) {
	m := NewTestModel(
		Text("Hello big  world"),
		ToolCalls(Call("c1", "add", `{"a":1,"b":2}`), Call("c2", "now", ``)),
	)

	tests := []struct {
		name string
		want []model.Delta
	}{
		{
			name: "text",
			want: []model.Delta{{Text: "Hello"}, {Text: " big"}, {Text: "  world"}},
		},
		{
			name: "tool calls",
			want: []model.Delta{
				{ToolCall: &model.ToolCallDelta{Index: 0, ID: "c1", Name: "add"}},
				{ToolCall: &model.ToolCallDelta{Index: 0, Arguments: `{"a":1`}},
				{ToolCall: &model.ToolCallDelta{Index: 0, Arguments: `,"b":2}`}},
				{ToolCall: &model.ToolCallDelta{Index: 1, ID: "c2", Name: "now"}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var deltas []model.Delta
			var final *model.Response
			for c, err := range m.GenerateStream(t.Context(), &model.Request{}) {
				if err != nil {
					t.Fatal(err)
				}
				if final != nil {
					t.Fatal("chunk after the response")
				}
				switch {
				case c.Delta != nil:
					deltas = append(deltas, *c.Delta)
				case c.Response != nil:
					final = c.Response
				}
			}
			if diff := cmp.Diff(tt.want, deltas); diff != "" {
				t.Errorf("deltas (-want +got):\n%s", diff)
			}
			if final == nil {
				t.Fatal("no response")
			}
			var text strings.Builder
			for _, d := range deltas {
				text.WriteString(d.Text)
			}
			if text.String() != final.Message.Text() {
				t.Errorf("deltas spell %q, response says %q", text.String(), final.Message.Text())
			}
		})
	}
}

func TestTestModelStreamStops(t *testing.T) {
	t.Run("consumer stops", func(t *testing.T) {
		m := NewTestModel(Text("a b c d"))
		n := 0
		for range m.GenerateStream(t.Context(), &model.Request{}) {
			n++
			break
		}
		if n != 1 {
			t.Fatalf("got %d chunks, want 1", n)
		}
	})
	t.Run("context cancelled mid-stream", func(t *testing.T) {
		m := NewTestModel(Text("a b c d"))
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		var gotErr error
		n := 0
		for c, err := range m.GenerateStream(ctx, &model.Request{}) {
			if err != nil {
				gotErr = err
				break
			}
			if c.Response != nil {
				t.Fatal("stream completed despite cancellation")
			}
			n++
			cancel()
		}
		if !errors.Is(gotErr, context.Canceled) || n != 1 {
			t.Fatalf("after %d deltas err = %v, want context.Canceled after 1", n, gotErr)
		}
	})
	t.Run("error step", func(t *testing.T) {
		errBoom := errors.New("boom")
		m := NewTestModel(errBoom)
		var errs []error
		for c, err := range m.GenerateStream(t.Context(), &model.Request{}) {
			if err == nil {
				t.Fatalf("unexpected chunk %+v", c)
			}
			errs = append(errs, err)
		}
		if len(errs) != 1 || !errors.Is(errs[0], errBoom) {
			t.Fatalf("errors = %v, want [boom]", errs)
		}
	})
}

func TestTestModelConcurrent(t *testing.T) {
	const n = 50
	steps := make([]Step, n)
	for i := range steps {
		steps[i] = Text(fmt.Sprint(i))
	}
	m := NewTestModel(steps...)
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			resp, err := m.Generate(context.Background(), &model.Request{Messages: []model.Message{model.UserMessage("x")}})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			seen[resp.Message.Text()]++
			mu.Unlock()
			_ = m.Requests()
		})
	}
	wg.Wait()
	if m.Calls() != n || len(seen) != n {
		t.Fatalf("Calls() = %d, distinct responses = %d, want %d each", m.Calls(), len(seen), n)
	}
}

func TestNewTestModelRejectsBadSteps(t *testing.T) {
	tests := []struct {
		name string
		step Step
	}{
		{"string", "hello"},
		{"nil response", (*model.Response)(nil)},
		{"nil", nil},
		{"wrong func", func() {}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			NewTestModel(Text("ok"), tt.step)
		})
	}
}

func TestFunctionModel(t *testing.T) {
	var m model.Model = FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
		return Text(strings.ToUpper(req.Messages[0].Text())), nil
	})
	if m.Name() != "function" {
		t.Errorf("Name() = %q", m.Name())
	}
	resp, err := m.Generate(t.Context(), &model.Request{Messages: []model.Message{model.UserMessage("shout")}})
	if err != nil || resp.Message.Text() != "SHOUT" {
		t.Fatalf("Generate = %v, %v", resp, err)
	}
	if (&TestModel{}).Name() != "test" {
		t.Error(`TestModel name is not "test"`)
	}
}

func TestResponseHelpers(t *testing.T) {
	tests := []struct {
		name string
		got  *model.Response
		want *model.Response
	}{
		{
			name: "text",
			got:  Text("three little words"),
			want: &model.Response{
				Message:      model.Message{Role: model.RoleAssistant, Parts: []model.Part{model.TextPart("three little words")}},
				FinishReason: model.FinishStop,
				Usage:        model.Usage{Requests: 1, InputTokens: 10, OutputTokens: 3, TotalTokens: 13},
			},
		},
		{
			name: "tool calls",
			got:  ToolCalls(Call("1", "a", `{}`), Call("2", "b", `{"x":1}`)),
			want: &model.Response{
				Message: model.Message{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{
					{ID: "1", Name: "a", Arguments: `{}`}, {ID: "2", Name: "b", Arguments: `{"x":1}`},
				}},
				FinishReason: model.FinishToolCalls,
				Usage:        model.Usage{Requests: 1, InputTokens: 10, OutputTokens: 10, TotalTokens: 20},
			},
		},
		{
			name: "json",
			got:  JSON(map[string]any{"city": "Paris", "n": 2}),
			want: &model.Response{
				Message:      model.Message{Role: model.RoleAssistant, Parts: []model.Part{model.TextPart(`{"city":"Paris","n":2}`)}},
				FinishReason: model.FinishStop,
				Usage:        model.Usage{Requests: 1, InputTokens: 10, OutputTokens: 1, TotalTokens: 11},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestSplit(t *testing.T) {
	words := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"one", []string{"one"}},
		{"Hello big world", []string{"Hello", " big", " world"}},
		{"  lead and trail  ", []string{"  lead", " and", " trail", "  "}},
		{"line\nbreak", []string{"line", "\nbreak"}},
		{"   ", []string{"   "}},
	}
	for _, tt := range words {
		got := splitWords(tt.in)
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("splitWords(%q) (-want +got):\n%s", tt.in, diff)
		}
		if strings.Join(got, "") != tt.in {
			t.Errorf("splitWords(%q) pieces do not spell the input", tt.in)
		}
	}
	halves := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"a", []string{"a"}},
		{"é", []string{"é"}},
		{"ab", []string{"a", "b"}},
		{`{"k":"é"}`, []string{`{"k":`, `"é"}`}},
		{"aéb", []string{"a", "éb"}},
		{"aé", []string{"a", "é"}},
	}
	for _, tt := range halves {
		got := splitHalves(tt.in)
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("splitHalves(%q) (-want +got):\n%s", tt.in, diff)
		}
	}
}
