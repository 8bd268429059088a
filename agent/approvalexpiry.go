package agent

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent/approval"
)

// approvalExpiryChannel carries the events of the timers of approval
// requests that expire ([Permissions.ApprovalTimeout]): each request
// with an expiry has a durable timer, which emits {"id": request} there
// when it passes, and a process serving timers denies the request if no
// one answered it. So an expiry costs a record in the store, not a scan
// of every request.
const approvalExpiryChannel = "calf.approvals.expiry"

// approvalExpiry is the payload of an expiry's event.
type approvalExpiry struct {
	ID string `json:"id"`
}

// expiryTimer is the id of the timer of the expiry of request id.
func expiryTimer(id string) string { return "approval-expiry/" + id }

// startExpiry starts the timer that denies the pending request a when it
// expires, unless it has one.
func (rt *Runtime) startExpiry(ctx context.Context, a *approval.Approval) error {
	if a.Status != approval.Pending || a.ExpiresAt.IsZero() {
		return nil
	}
	data, err := json.Marshal(approvalExpiry{ID: a.ID})
	if err != nil {
		return err
	}
	_, err = rt.StartTimer(ctx, Timer{
		ID: expiryTimer(a.ID), Due: a.ExpiresAt, Channel: approvalExpiryChannel, Data: data, Key: a.RunID,
		EventID:  a.ID + ".expiry",
		Metadata: calf.Metadata{CorrelationID: a.CorrelationID, RunID: a.RunID, SessionID: a.SessionID},
	})
	return err
}

// serveApprovalExpiry has this process deny the requests whose expiry's
// timer fired.
func (rt *Runtime) serveApprovalExpiry(ctx context.Context) {
	err := calf.CreateChannels(ctx, rt.client.Broker(), approvalExpiryChannel)
	if err == nil {
		err = rt.client.Handle(ctx, approvalExpiryChannel, rt.onApprovalExpiry, &calf.SubscribeOptions{Group: approvalExpiryChannel})
	}
	if err != nil {
		rt.log.Error("agent: serve the expiries of approval requests", "err", err)
	}
}

// onApprovalExpiry denies the request whose expiry passed, unless it was
// answered: the denial is published as an answer, which its run carries
// out.
func (rt *Runtime) onApprovalExpiry(ctx context.Context, msg *calf.Message) error {
	var ev approvalExpiry
	if err := msg.Decode(&ev); err != nil {
		return calf.Permanent(err)
	}
	if ev.ID == "" {
		return calf.Permanent(errors.New("agent: an approval expiry with no request id"))
	}
	_, err := approval.ExpireRequest(ctx, rt.store, rt.client, ev.ID)
	return err
}
