package e2e

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
)

// stormRuns is how many runs each half of a duplicate storm makes.
const stormRuns = 4

// Every delivery handled three times, across two worker processes on NATS
// and PostgreSQL: the runs' final states and outputs are those of a
// fault-free run, with one model call per step and one execution per tool
// call.
func TestDuplicateStormNATSPostgres(t *testing.T) {
	duplicateStorm(t, natsPostgres, func(cfg *workerConfig) { cfg.DuplicateDeliveries = 3 })
}

// Every message published three times on Kafka, which keeps every copy,
// across two worker processes with Redis: the same.
func TestDuplicateStormKafkaRedis(t *testing.T) {
	duplicateStorm(t, kafkaRedis, func(cfg *workerConfig) { cfg.DuplicatePublishes = 3 })
}

func duplicateStorm(t *testing.T, b backend, storm func(*workerConfig)) {
	h := newHarness(t)
	cfg := h.config(b)
	c := newCaller(t, cfg)
	stormy := *cfg
	storm(&stormy)

	clean := runBatch(t, h, c, cfg, "clean")
	noisy := runBatch(t, h, c, &stormy, "storm")
	for i := range stormRuns {
		if diff := cmp.Diff(clean[i], noisy[i]); diff != "" {
			t.Errorf("run %d: state after the storm differs from the fault-free run's (-clean +storm):\n%s", i, diff)
		}
	}
}

// runBatch runs stormRuns runs of W1 on two fresh workers with cfg and
// returns their final states and outputs, without what differs from run to
// run (ids, times, the caller's inbox).
func runBatch(t *testing.T, h *harness, c *caller, cfg *workerConfig, label string) []string {
	t.Helper()
	for range 2 {
		h.ready(h.start(cfg))
	}
	ids := make([]string, stormRuns)
	results := make([]<-chan runResult, stormRuns)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%d-%s", label, i, calf.NewID()[:8])
		results[i] = c.run(t, ids[i])
	}
	for i, id := range ids {
		checkW1(t, id, await(t, id, results[i]))
	}
	h.stopAll()
	var out []string
	for _, id := range ids {
		if diff := cmp.Diff(map[int]int{1: 1, 2: 1}, h.modelCalls(id)); diff != "" {
			t.Errorf("%s: model calls of run %s by step (-want +got):\n%s", label, id, diff)
		}
		if n := h.count("tool_done", id); n != 1 {
			t.Errorf("%s: tool ran %d times in run %s; want 1", label, n, id)
		}
		st, err := c.rt.LoadAgentRun(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		st.ID, st.StartedAt, st.EndedAt = "", time.Time{}, time.Time{}
		outs := c.outputsOf(id)
		if len(outs) == 0 {
			t.Errorf("%s: no output of run %s on the output channel", label, id)
		}
		for i := range outs {
			outs[i].RunID = ""
		}
		// Copies of an output are identical: compare the distinct ones.
		distinct := map[string]agent.OutputEvent{}
		for _, o := range outs {
			k, _ := json.Marshal(o)
			distinct[string(k)] = o
		}
		data, err := json.MarshalIndent(struct {
			State   *agent.RunInfo
			Outputs map[string]agent.OutputEvent
		}{st, distinct}, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(data))
		t.Logf("%s: run %s: %d output message(s), %d handler starts", label, id, len(outs), h.count("handle", id))
	}
	return out
}
