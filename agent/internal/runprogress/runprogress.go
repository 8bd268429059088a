// Package runprogress reads where a stored run stands from its record
// (kind [store.KindRun]): whether it has ended, and which of its tool calls
// are answered. The agent's engine keeps the whole record; the approval
// package, which answers for the runs' requests without the engine, reads
// these few fields of it here, by the same rules.
package runprogress

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/calf-go/calf/store"
)

// Terminal reports whether a run of the given status has ended: complete,
// failed, cancelled, or handed off to another run.
func Terminal(status string) bool {
	return status == "complete" || status == "failed" || status == "cancelled" || status == "handed_off"
}

// Answered reports whether the tool call id of step is answered in a run
// at step at that the call advancedBy advanced to it, whose pending call
// id has its result when resultIn: a run past the call's step has its
// result, a run before it cannot.
func Answered(at int, advancedBy string, resultIn bool, step int, id string) bool {
	switch {
	case at > step:
		return true
	case at < step:
		return false
	case advancedBy == id:
		return true
	}
	return resultIn
}

// Progress is what a run's record says of where the run stands.
type Progress struct {
	Status     string        `json:"status"`
	Error      string        `json:"error,omitempty"`
	Step       int           `json:"step"`
	AdvancedBy string        `json:"advanced_by,omitempty"`
	Pending    []pendingCall `json:"pending,omitempty"`
}

// pendingCall is a tool call of the run's current step.
type pendingCall struct {
	ID     string          `json:"id"`
	Result json.RawMessage `json:"result,omitempty"`
}

// Read returns the progress of the run id stored in s, or an error
// matching [store.ErrNotFound].
func Read(ctx context.Context, s store.Store, id string) (*Progress, error) {
	rec, err := s.Get(ctx, store.KindRun, id)
	if err != nil {
		return nil, err
	}
	var p Progress
	if err := json.Unmarshal(rec.Data, &p); err != nil || p.Status == "" {
		return nil, fmt.Errorf("corrupt stored run %s: %v", id, err)
	}
	return &p, nil
}

// Ended reports whether the run has ended.
func (p *Progress) Ended() bool { return Terminal(p.Status) }

// Answered reports whether the tool call id of step is answered.
func (p *Progress) Answered(step int, id string) bool {
	in := false
	for _, c := range p.Pending {
		if c.ID == id {
			in = len(c.Result) > 0 && string(c.Result) != "null"
			break
		}
	}
	return Answered(p.Step, p.AdvancedBy, in, step, id)
}
