package tool_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/calf-go/calf/tool"
)

// FuzzCall feeds arbitrary arguments to a tool: Call must never panic, and
// must either run the function and return a result or return an
// *ArgumentError without running it.
func FuzzCall(f *testing.F) {
	for _, seed := range []string{
		``, `null`, `{}`, `[]`, `{"location":{"city":"Paris"}}`,
		`{"location":{"city":"a","zip":1},"tags":["x"],"limits":{"a":1},"level":-3,"sizes":["M"],"priority":2}`,
		`{"location":{"city":5}}`, `{"location":`, `"str"`, `1e999`, `{"big":1e30,"location":{"city":""}}`,
		"{\"location\":{\"city\":\"\xff\"}}", `[[[[[[[[[[]]]]]]]]]]`, `{"location":{"city":"a"}}{}`,
	} {
		f.Add([]byte(seed))
	}
	calls := 0
	search := tool.Must(tool.New("search", "", func(_ context.Context, in SearchArgs) (SearchArgs, error) {
		calls++
		return in, nil
	}))
	f.Fuzz(func(t *testing.T, args []byte) {
		before := calls
		res, err := search.Call(context.Background(), json.RawMessage(args))
		if err != nil {
			var ae *tool.ArgumentError
			if !errors.As(err, &ae) {
				t.Fatalf("Call(%q) error %v is not an *ArgumentError", args, err)
			}
			if calls != before {
				t.Fatalf("Call(%q) ran the function on bad arguments", args)
			}
			return
		}
		if res == nil || calls != before+1 {
			t.Fatalf("Call(%q) = %v with %d function calls", args, res, calls-before)
		}
		if !json.Valid(res.Structured) {
			t.Fatalf("Call(%q) gave invalid structured content %q", args, res.Structured)
		}
	})
}
