package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/calf-go/calf"
)

// boundaries are the crash points of the kill -9 matrix, in the order a
// run reaches them.
var boundaries = []string{"input_saved", "model_recorded", "tool_call_published", inTool, "tool_recorded", "result_applied", "before_output", "output_published"}

// fastFailover shortens how long a dead worker holds its messages, so that
// the matrix stays quick; TestRecoveryTime measures the defaults.
func fastFailover(cfg *workerConfig) {
	cfg.AckWait = 2 * time.Second
	cfg.SessionTimeout = time.Second
}

// A worker killed with SIGKILL at each step boundary of W1: the run
// completes on a second worker, no recorded model step is called again,
// no recorded tool runs again, and the caller gets one output.
func TestKillWorkerNATSPostgres(t *testing.T) { killMatrix(t, natsPostgres) }

// The same on Kafka (kfake, over TCP) with Redis.
func TestKillWorkerKafkaRedis(t *testing.T) { killMatrix(t, kafkaRedis) }

func killMatrix(t *testing.T, b backend) {
	for _, point := range boundaries {
		t.Run(point, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			cfg := h.config(b)
			fastFailover(cfg)
			c := newCaller(t, cfg)

			crashing := *cfg
			crashing.Crash = point
			first := h.start(&crashing)
			h.ready(first)
			id := "run-" + calf.NewID()
			res := c.run(t, id)
			crash := h.waitEvent("crash at "+point, func(ev event) bool { return ev.Ev == "crash" && ev.Run == id })
			if crash.Point != point || crash.PID != first.pid {
				t.Fatalf("crash %+v; want %s in worker %d", crash, point, first.pid)
			}
			h.waitExit(first)

			second := h.start(cfg)
			r := await(t, id, res)
			checkW1(t, id, r)
			h.stopAll()

			checkNoRepeats(t, h, id, point)
			// The run went on in the second worker.
			var onSecond int
			for _, ev := range h.eventsOf("handle", id) {
				if ev.PID == second.pid {
					onSecond++
				}
			}
			if onSecond == 0 {
				t.Errorf("the second worker handled nothing of run %s", id)
			}
			outs := c.outputsOf(id)
			switch {
			case len(outs) == 0:
				t.Errorf("no output of run %s on the output channel", id)
			case b.name == natsPostgres.name && len(outs) != 1:
				// NATS drops a message published again with the same id.
				t.Errorf("%d outputs of run %s on the output channel; want 1", len(outs), id)
			}
			for _, o := range outs[min(1, len(outs)):] {
				if diff := cmp.Diff(outs[0], o); diff != "" {
					t.Errorf("outputs of run %s differ (-first +later):\n%s", id, diff)
				}
			}
			t.Logf("%d output message(s) on the output channel; %d handler starts on the second worker", len(outs), onSecond)
		})
	}
}

// checkNoRepeats checks a crashed run's counts: one model call per step,
// and one completed execution of the tool, besides one that started in the
// killed process and was not recorded.
func checkNoRepeats(t *testing.T, h *harness, id, point string) {
	t.Helper()
	if diff := cmp.Diff(map[int]int{1: 1, 2: 1}, h.modelCalls(id)); diff != "" {
		t.Errorf("model calls of run %s by step (-want +got):\n%s", id, diff)
	}
	crashes := h.eventsOf("crash", id)
	if len(crashes) != 1 {
		t.Fatalf("%d crashes; want 1", len(crashes))
	}
	var starts, dones, donesElsewhere int
	starts = h.count("tool_start", id)
	for _, ev := range h.eventsOf("tool_done", id) {
		dones++
		if ev.PID != crashes[0].PID {
			donesElsewhere++
		}
	}
	switch point {
	case inTool:
		// Killed inside the tool: it runs again, once, to the end.
		if starts != 2 || dones != 1 {
			t.Errorf("tool started %d and completed %d times; want 2 and 1", starts, dones)
		}
	case "tool_call_published":
		// The killed process may have started (even finished) the tool
		// before it died, without recording the result: the tool then runs
		// again, once.
		if starts < 1 || starts > 2 || dones < 1 || dones > starts || donesElsewhere > 1 {
			t.Errorf("tool started %d and completed %d times (%d after the crash); want 1 or 2, and one completion after the crash at most",
				starts, dones, donesElsewhere)
		}
	default:
		if starts != 1 || dones != 1 {
			t.Errorf("tool started %d and completed %d times; want 1 and 1", starts, dones)
		}
	}
}

// The embedded default, the memory broker with SQLite: the process (caller
// and worker in one) is killed at each boundary and started again on the
// same SQLite file. The memory broker's messages are gone; the new process
// recovers the run from the store (agent.Recover) and, submitting it
// again, gets its output once.
func TestKillProcessMemorySQLite(t *testing.T) {
	for _, point := range boundaries {
		t.Run(point, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			cfg := h.config(memorySQLite)
			id := "run-" + calf.NewID()
			cfg.Runs = []string{id}

			crashing := *cfg
			crashing.Crash = point
			first := h.start(&crashing)
			crash := h.waitEvent("crash at "+point, func(ev event) bool { return ev.Ev == "crash" && ev.Run == id })
			if crash.Point != point {
				t.Fatalf("crash %+v; want %s", crash, point)
			}
			h.waitExit(first)

			second := h.start(cfg)
			out := h.waitEvent("output of "+id, func(ev event) bool { return ev.Ev == "output" && ev.Run == id })
			rec := h.waitEvent("recovery", func(ev event) bool { return ev.Ev == "recovered" && ev.PID == second.pid })
			h.stopAll()

			if out.Content != wantOutput || out.Error != "" {
				t.Errorf("output %q (error %q); want %q", out.Content, out.Error, wantOutput)
			}
			if n := h.count("output", id); n != 1 {
				t.Errorf("the caller got %d outputs; want 1", n)
			}
			// A run that had ended needs no recovery: submitting it again
			// brings its output back.
			wantRecovered := 1
			if point == "before_output" || point == "output_published" {
				wantRecovered = 0
			}
			if rec.N != wantRecovered {
				t.Errorf("recovered %d runs; want %d", rec.N, wantRecovered)
			}
			checkNoRepeats(t, h, id, point)
		})
	}
}

func init() {
	for _, p := range boundaries {
		if _, ok := crashPoints[p]; !ok && p != inTool {
			panic(fmt.Sprintf("unknown crash point %s", p))
		}
	}
}
