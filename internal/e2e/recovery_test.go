package e2e

import (
	"math"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/calf-go/calf"
)

// killsEnv sets how many workers TestRecoveryTime kills per broker.
const killsEnv = "CALF_E2E_KILLS"

// CALF_E2E_ACK_WAIT and CALF_E2E_SESSION_TIMEOUT, when set, replace the
// NATS AckWait and the Kafka SessionTimeout of TestRecoveryTime (Go
// durations), to measure other settings than the defaults.
const (
	ackWaitEnv        = "CALF_E2E_ACK_WAIT"
	sessionTimeoutEnv = "CALF_E2E_SESSION_TIMEOUT"
)

// defaultKills keeps the measurement short in CI; docs/benchmarks.md
// reports a run with CALF_E2E_KILLS=20.
const defaultKills = 3

// TestRecoveryTime measures, with the adapters' default settings, the time
// from the SIGKILL of a worker in the middle of a run (its model response
// recorded, the tool call not yet published) to the start of the next
// handler of that run on another worker. Two workers serve; each killed
// one is replaced. It reports the median, the 99th percentile and the
// maximum; it asserts only that every run completes without repeating a
// recorded step.
func TestRecoveryTime(t *testing.T) {
	kills := defaultKills
	if s := os.Getenv(killsEnv); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive number", killsEnv, s)
		}
		kills = n
	}
	for _, b := range []backend{natsPostgres, kafkaRedis} {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			measureRecovery(t, b, kills)
		})
	}
}

func measureRecovery(t *testing.T, b backend, kills int) {
	h := newHarness(t)
	cfg := h.config(b)
	cfg.Crash = "model_recorded"
	for env, d := range map[string]*time.Duration{ackWaitEnv: &cfg.AckWait, sessionTimeoutEnv: &cfg.SessionTimeout} {
		if s := os.Getenv(env); s != "" {
			v, err := time.ParseDuration(s)
			if err != nil {
				t.Fatalf("%s: %v", env, err)
			}
			*d = v
		}
	}
	c := newCaller(t, cfg)
	for range 2 {
		h.ready(h.start(cfg))
	}
	var took []time.Duration
	for range kills {
		id := "run-" + calf.NewID()
		res := c.run(t, id)
		crash := h.waitEvent("crash in "+id, func(ev event) bool { return ev.Ev == "crash" && ev.Run == id })
		// Keep two workers: replace the dead one at once.
		replacement := h.start(cfg)
		next := h.waitEvent("recovery of "+id, func(ev event) bool {
			return ev.Ev == "handle" && ev.Run == id && ev.PID != crash.PID && ev.T >= crash.T
		})
		took = append(took, time.Duration(next.T-crash.T))
		checkW1(t, id, await(t, id, res))
		checkNoRepeats(t, h, id, cfg.Crash)
		h.ready(replacement)
	}
	h.stopAll()
	slices.Sort(took)
	t.Logf("%s (AckWait %v, SessionTimeout %v; 0 is the default): recovery after %d kills: p50 %s, p99 %s, max %s (all: %v)", b.name, cfg.AckWait, cfg.SessionTimeout, len(took),
		percentile(took, 50).Round(time.Millisecond), percentile(took, 99).Round(time.Millisecond),
		took[len(took)-1].Round(time.Millisecond), took)
}

// percentile returns the p-th percentile of sorted durations, by nearest
// rank.
func percentile(sorted []time.Duration, p float64) time.Duration {
	i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}
