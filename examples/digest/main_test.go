package main

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
)

// The digest agent runs every second, twice, each run with the task as
// its prompt; a second start of the program goes on from the schedule in
// the store.
func TestScheduledDigests(t *testing.T) {
	var n atomic.Int64
	m := modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
		if got := req.Messages[len(req.Messages)-1].Text(); got != "status?" {
			t.Errorf("prompt %q", got)
		}
		return modeltest.Text("digest " + string(rune('0'+n.Add(1)))), nil
	})
	dir := t.TempDir()
	for range 2 {
		var out strings.Builder
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		res, err := run(ctx, m, "status?", config{every: time.Second, times: 2, dir: dir}, &out)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), "scheduled: the first run at") || strings.Count(out.String(), " digest ") != 2 || !strings.HasPrefix(res, "2 digests") {
			t.Errorf("output %q, result %q", out.String(), res)
		}
	}
	if got := n.Load(); got < 4 {
		t.Errorf("the model answered %d runs, want at least 4", got)
	}
}
