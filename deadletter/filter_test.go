package deadletter_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/deadletter"
	storemem "github.com/calf-go/calf/store/memory"
)

func TestSelectAndReplayMany(t *testing.T) {
	ctx := context.Background()
	st := storemem.New()
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	park := func(id, channel, group, cause string, at time.Time) string {
		t.Helper()
		orig := &calf.Message{ID: id, Channel: channel, Key: "run-" + id, Data: []byte(`{}`)}
		dl := calf.NewDeadLetterMessage(orig, group, errors.New(cause), 5, at)
		if err := deadletter.Handler(st)(ctx, dl); err != nil {
			t.Fatal(err)
		}
		return dl.ID
	}
	a1 := park("m1", "calf.agent.calc.inference", "calf.agent.calc.inference", "load run: connection refused", t0)
	a2 := park("m2", "calf.agent.calc.tool_call", "calf.agent.calc.tool_call", "boom", t0.Add(time.Minute))
	w1 := park("m3", "calf.agent.writer.input", "calf.agent.writer.input", "load run: connection refused", t0.Add(2*time.Minute))
	tm := park("m4", "calf.team.crew.step", "calf.team.crew", "connection refused", t0.Add(3*time.Minute))

	ids := func(f deadletter.Filter) []string {
		t.Helper()
		recs, err := deadletter.Select(ctx, st, f)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range recs {
			out = append(out, r.ID)
		}
		slices.Sort(out)
		return out
	}
	sorted := func(s ...string) []string { slices.Sort(s); return s }
	tests := []struct {
		name string
		f    deadletter.Filter
		want []string
	}{
		{"all", deadletter.Filter{}, sorted(a1, a2, w1, tm)},
		{"agent", deadletter.Filter{Agent: "calc"}, sorted(a1, a2)},
		{"team", deadletter.Filter{Agent: "crew"}, sorted(tm)},
		{"channel", deadletter.Filter{Channel: "calf.agent.*.inference"}, sorted(a1)},
		{"error", deadletter.Filter{Error: "connection refused"}, sorted(a1, w1, tm)},
		{"time range", deadletter.Filter{Since: t0.Add(time.Minute), Until: t0.Add(3 * time.Minute)}, sorted(a2, w1)},
		{"all of them", deadletter.Filter{Agent: "calc", Error: "refused", Since: t0}, sorted(a1)},
	}
	for _, tt := range tests {
		if got := ids(tt.f); !slices.Equal(got, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}

	b := memory.New(nil)
	t.Cleanup(func() { _ = b.Close() })
	var republished []string
	if _, err := b.Subscribe(ctx, "calf.>", func(_ context.Context, m *calf.Message) error {
		republished = append(republished, m.ID)
		return nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	out := deadletter.ReplayMany(ctx, b, st, []string{a1, "deadletter.nope", w1, a1}, t0.Add(time.Hour))
	if len(out) != 4 || !out[0].Published || !errors.Is(out[1].Err, deadletter.ErrNotFound) || !out[2].Published || out[3].Published || out[3].Err != nil {
		t.Fatalf("outcomes %+v", out)
	}
	drain(t, b)
	slices.Sort(republished)
	if want := []string{"m1.replay", "m3.replay"}; !slices.Equal(republished, want) {
		t.Errorf("republished %v, want %v (each once)", republished, want)
	}
	// What was replayed is no longer selected, unless asked for.
	if got := ids(deadletter.Filter{}); !slices.Equal(got, sorted(a2, tm)) {
		t.Errorf("after the replay: %v", got)
	}
	if got := ids(deadletter.Filter{Replayed: true}); len(got) != 4 {
		t.Errorf("with the replayed ones: %v", got)
	}
}

func drain(t *testing.T, b *memory.Broker) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := b.Drain(ctx); err != nil {
		t.Fatal(err)
	}
}
