package calf

import (
	"errors"
	"fmt"
)

// Sentinel errors of the event runtime.
var (
	// ErrClosed is returned by operations on a closed broker or client.
	ErrClosed = errors.New("calf: closed")
	// ErrMessageTooLarge is returned when a message exceeds the size limit.
	ErrMessageTooLarge = errors.New("calf: message too large")
	// ErrInvalidChannel is returned for a malformed channel or pattern.
	ErrInvalidChannel = errors.New("calf: invalid channel")
	// ErrTimeout is returned when a request gets no reply in time.
	ErrTimeout = errors.New("calf: timed out")
	// ErrFollowerBehind is returned by [Follower.Next] once the follower's
	// buffer overflowed ([Options.FollowBuffer]): the messages before the
	// overflow have all been returned, those after it were dropped.
	ErrFollowerBehind = errors.New("calf: follower fell behind")
)

// DecodeError reports a message whose data does not decode.
type DecodeError struct {
	Channel string
	ID      string
	Err     error
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("calf: decode message %s on %s: %v", e.ID, e.Channel, e.Err)
}

func (e *DecodeError) Unwrap() error { return e.Err }

// SizeError reports a message over the size limit. It matches
// [ErrMessageTooLarge] with errors.Is.
type SizeError struct {
	Channel string
	Size    int
	Limit   int
}

func (e *SizeError) Error() string {
	return fmt.Sprintf("calf: message on %s is %d bytes, over the limit of %d", e.Channel, e.Size, e.Limit)
}

// Is reports whether target is [ErrMessageTooLarge].
func (e *SizeError) Is(target error) bool { return target == ErrMessageTooLarge }

type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Permanent marks err as one that redelivery cannot fix. A handler that
// returns it has its message parked on the dead-letter channel at once
// instead of being retried. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err}
}

// IsPermanent reports whether err was marked with [Permanent].
func IsPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}
