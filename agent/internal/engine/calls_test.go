package engine

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/tool"
)

func rawTool(call func(ctx context.Context, args json.RawMessage) (*tool.Result, error)) tool.Tool {
	return tool.NewRaw(model.ToolDefinition{Name: "t", Parameters: json.RawMessage(`{"type":"object"}`)}, call)
}

// A tool's call returns its result, a panic as an error, and at its
// context's end returns at once, handing back later what the tool returns.
func TestExecutorCall(t *testing.T) {
	var e Executor
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	call := func(ctx context.Context, tl tool.Tool) (ToolReturn, <-chan ToolReturn) {
		return e.Call(ctx, ToolCall{Tool: tl, Arguments: json.RawMessage(`{}`), Agent: "a", Name: "t", Log: log})
	}

	r, late := call(t.Context(), rawTool(func(context.Context, json.RawMessage) (*tool.Result, error) { return tool.TextResult("ok"), nil }))
	if r.Err != nil || r.Out.Text() != "ok" || late != nil {
		t.Fatalf("a call that returns: %+v, late %v", r, late != nil)
	}

	r, late = call(t.Context(), rawTool(func(context.Context, json.RawMessage) (*tool.Result, error) { panic("boom") }))
	if r.Err == nil || !strings.Contains(r.Err.Error(), `tool "t" panicked: boom`) || late != nil {
		t.Fatalf("a call that panics: %+v, late %v", r, late != nil)
	}

	release := make(chan struct{})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel()
	r, late = call(ctx, rawTool(func(context.Context, json.RawMessage) (*tool.Result, error) {
		<-release // ignores its context
		return tool.TextResult("late"), nil
	}))
	if !errors.Is(r.Err, context.DeadlineExceeded) || late == nil {
		t.Fatalf("a call past its timeout: %+v, late %v", r, late != nil)
	}
	close(release)
	select {
	case lr := <-late:
		if lr.Out.Text() != "late" {
			t.Errorf("the late return: %+v", lr)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the late return never came")
	}
}

// CallWithin returns ErrTimedOut when its timeout passes first, and a
// panic as an error.
func TestCallWithin(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	_, err := CallWithin(t.Context(), 10*time.Millisecond, func(context.Context) (int, error) {
		<-block // ignores its context
		return 1, nil
	})
	if !errors.Is(err, ErrTimedOut) {
		t.Errorf("past the timeout: %v, want ErrTimedOut", err)
	}
	_, err = CallWithin(t.Context(), time.Second, func(context.Context) (int, error) { panic("boom") })
	if err == nil || !strings.HasPrefix(err.Error(), "panicked: boom") {
		t.Errorf("a panic: %v", err)
	}
}
