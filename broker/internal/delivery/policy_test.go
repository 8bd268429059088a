package delivery

import (
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/calf-go/calf"
)

func TestAfter(t *testing.T) {
	outage := fmt.Errorf("agent: load run r: %w", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED})
	plain := errors.New("handler failed")
	msg := &calf.Message{ID: "m", Channel: "calf.agent.a.input"}
	dead := &calf.Message{ID: "deadletter.g.m", Channel: calf.DeadLetterChannel}

	// A clock that advances a minute each time it is read.
	clock := func() func() time.Time {
		now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		return func() time.Time { now = now.Add(time.Minute); return now }
	}
	backoff := func(int) time.Duration { return time.Millisecond }

	tests := []struct {
		name   string
		budget time.Duration
		msg    *calf.Message
		errs   []error
		want   []string // per failure: "outage", "retry" or "park"
	}{
		{"plain errors use up attempts", 0, msg, []error{plain, plain, plain}, []string{"retry", "retry", "park"}},
		{"permanent parks at once", 0, msg, []error{calf.Permanent(outage)}, []string{"park"}},
		{"outages use up no attempt", time.Hour, msg, []error{outage, outage, outage, outage, outage, plain, plain, plain}, []string{"outage", "outage", "outage", "outage", "outage", "retry", "retry", "park"}},
		// The clock reads one minute later at each failure: the budget of
		// 3 minutes covers the outage's first three failures, then they
		// count.
		{"past the budget outages count", 3 * time.Minute, msg, []error{outage, outage, outage, outage, outage, outage}, []string{"outage", "outage", "outage", "retry", "retry", "park"}},
		{"a plain error ends the outage", 3 * time.Minute, msg, []error{outage, plain, outage, outage, outage}, []string{"outage", "retry", "outage", "outage", "outage"}},
		{"no budget", -1, msg, []error{outage, outage, outage}, []string{"retry", "retry", "park"}},
		{"marked unavailable", time.Hour, msg, []error{calf.Unavailable(plain)}, []string{"outage"}},
		{"dead letters are never parked", 0, dead, []error{plain, calf.Permanent(plain), plain, plain, plain}, []string{"retry", "retry", "retry", "retry", "retry"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &Policy{MaxAttempts: 3, Backoff: backoff, OutageBudget: tt.budget, Now: clock()}
			tr := NewTracker(1)
			for i, err := range tt.errs {
				v := p.After(tr, tt.msg, err)
				got := "retry"
				switch {
				case v.Park:
					got = "park"
				case v.Outage:
					got = "outage"
				}
				if got != tt.want[i] {
					t.Fatalf("failure %d (%v): %s, want %s", i+1, err, got, tt.want[i])
				}
				if !v.Park && v.Wait <= 0 {
					t.Fatalf("failure %d: no wait before the next attempt", i+1)
				}
				if v.Park {
					return
				}
			}
		})
	}
}

func TestOutageBackoffIsCapped(t *testing.T) {
	p := &Policy{MaxAttempts: 1, Backoff: func(int) time.Duration { return time.Hour }}
	tr := NewTracker(1)
	for range 50 {
		v := p.After(tr, &calf.Message{}, calf.Unavailable(errors.New("down")))
		if !v.Outage || v.Wait > MaxOutageBackoff {
			t.Fatalf("verdict %+v, want an outage retry within %s", v, MaxOutageBackoff)
		}
	}
	if tr.Attempt != 1 {
		t.Errorf("attempt %d after outages, want 1", tr.Attempt)
	}
}
