package engine

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/tool"
)

// A custom agent's step numbers its model calls, tool calls and approval
// requests from 1, in the order it makes them, and what a model or tool
// call returned is recorded (kind custom_call) so that the step, run
// again, gets it without calling again.

// KindCustomCall is the store kind of what a custom agent's step's model
// calls and tool calls returned, one record per call, id
// "{run}/{step}/{n}"; swept with the run.
const KindCustomCall = "custom_call"

// CustomCallPrefix starts the call id of a custom step's tool call or
// approval request: "custom-{step}-{n}".
const CustomCallPrefix = "custom-"

// CallRecord is what one call of a step returned, as recorded. Its JSON
// is a stored format.
type CallRecord struct {
	// Kind is "model", "tool" or "sleep".
	Kind     string          `json:"kind"`
	Response *model.Response `json:"response,omitempty"`
	Result   *tool.Result    `json:"result,omitempty"`
	Error    string          `json:"error,omitempty"`
	// Wake, of a sleep, is when the step goes on.
	Wake time.Time `json:"wake,omitzero"`
}

// StepCall returns the id of the record of call n of step of run and the
// call's id.
func StepCall(run string, step, n int) (key, callID string) {
	s, c := strconv.Itoa(step), strconv.Itoa(n)
	return run + "/" + s + "/" + c, CustomCallPrefix + s + "-" + c
}

// RecordedCall returns the record key of s, which must be of kind, or
// false when there is none. A record of another kind is an error: the
// step did not make its calls in the same order as when it first ran.
func RecordedCall(ctx context.Context, s store.Store, key, kind string) (*CallRecord, bool, error) {
	r, err := s.Get(ctx, KindCustomCall, key)
	if errors.Is(err, store.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	var rec CallRecord
	if err := json.Unmarshal(r.Data, &rec); err != nil {
		return nil, false, fmt.Errorf("agent: corrupt call record %s: %v", key, err)
	}
	if rec.Kind != kind {
		return nil, false, fmt.Errorf("agent: call %s of the step was a %s call when the step first ran, and is a %s call now: a step must make its calls in the same order each time", key, rec.Kind, kind)
	}
	return &rec, true, nil
}

// RecordCall records rec as key in s, unless another run of the step did
// first, and returns the record that stands.
func RecordCall(ctx context.Context, s store.Store, key string, rec *CallRecord) (*CallRecord, error) {
	data, err := json.Marshal(rec)
	if err != nil {
		return nil, err
	}
	if _, err := s.Put(ctx, KindCustomCall, key, data, 0); errors.Is(err, store.ErrConflict) {
		got, ok, err := RecordedCall(ctx, s, key, rec.Kind)
		if err != nil || !ok {
			return nil, cmp.Or(err, fmt.Errorf("agent: call record %s vanished", key))
		}
		return got, nil
	} else if err != nil {
		return nil, err
	}
	return rec, nil
}
