package delivery

import (
	"context"
	"testing"
	"time"

	"github.com/calf-go/calf"
)

func TestDefaults(t *testing.T) {
	backoff := func(int) time.Duration { return time.Second }
	d := Defaults{Broker: "b", MaxAttempts: 5, Concurrency: 8, OutageBudget: time.Minute, Backoff: backoff}

	o := d.Resolve(nil)
	if o.MaxAttempts != 5 || o.Concurrency != 8 || o.OutageBudget != time.Minute {
		t.Errorf("Resolve(nil) = %+v, want the defaults", o)
	}
	o = d.Resolve(&calf.SubscribeOptions{Group: "g", MaxAttempts: 2, Concurrency: 3, OutageBudget: -1})
	if o.Group != "g" || o.MaxAttempts != 2 || o.Concurrency != 3 || o.OutageBudget != -1 {
		t.Errorf("Resolve kept %+v, want what the options set", o)
	}

	r := d.Runner(context.Background(), o, func(context.Context, *calf.Message) error { return nil }, nil)
	if r.Broker != "b" || r.Group != "g" || r.Policy.MaxAttempts != 2 || r.Policy.OutageBudget != -1 || r.Policy.Backoff(1) != time.Second || r.ParkBackoff(1) != time.Second {
		t.Errorf("runner %+v does not carry the options and the defaults", r)
	}
	if r.Slots != nil {
		t.Error("the runner bounds its calls; the broker decides")
	}
}
