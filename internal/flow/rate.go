package flow

import (
	"context"
	"errors"
	"time"
)

// The rate limit is throttled's GCRA, whose state, one number (the
// theoretical arrival time), lives in the key's record: the limiter's
// store is a cell read and written within the record's compare-and-swap,
// so that the slot and the rate are taken together or not at all.

// tatCell is the rate state of one key during one admission.
type tatCell struct {
	tat int64 // 0: unset
	now time.Time
}

type cellKey struct{}

func withCell(ctx context.Context, c *tatCell) context.Context {
	return context.WithValue(ctx, cellKey{}, c)
}

var errNoCell = errors.New("flow control: rate limit used outside an admission")

// nopStore is the limiter's store: the cell in the context.
type nopStore struct{}

func cell(ctx context.Context) (*tatCell, error) {
	c, ok := ctx.Value(cellKey{}).(*tatCell)
	if !ok {
		return nil, errNoCell
	}
	return c, nil
}

func (nopStore) GetWithTime(ctx context.Context, _ string) (int64, time.Time, error) {
	c, err := cell(ctx)
	if err != nil {
		return 0, time.Time{}, err
	}
	if c.tat == 0 {
		return -1, c.now, nil
	}
	return c.tat, c.now, nil
}

func (nopStore) SetIfNotExistsWithTTL(ctx context.Context, _ string, value int64, _ time.Duration) (bool, error) {
	c, err := cell(ctx)
	if err != nil {
		return false, err
	}
	if c.tat != 0 {
		return false, nil
	}
	c.tat = value
	return true, nil
}

func (nopStore) CompareAndSwapWithTTL(ctx context.Context, _ string, old, value int64, _ time.Duration) (bool, error) {
	c, err := cell(ctx)
	if err != nil {
		return false, err
	}
	if c.tat != old {
		return false, nil
	}
	c.tat = value
	return true, nil
}
