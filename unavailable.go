package calf

import (
	"errors"
	"net"
	"syscall"
)

// ErrUnavailable marks an error caused by a service that cannot be reached
// for now (a store or a broker that is down, restarting or failing over),
// as opposed to an error of the handler itself. Brokers retry a message
// whose handler failed with such an error for as long as their outage
// budget allows, without counting the attempts, instead of parking it.
var ErrUnavailable = errors.New("calf: service unavailable")

type unavailableError struct{ err error }

func (e *unavailableError) Error() string { return e.err.Error() }
func (e *unavailableError) Unwrap() error { return e.err }

// Is reports whether target is [ErrUnavailable].
func (e *unavailableError) Is(target error) bool { return target == ErrUnavailable }

// Unavailable marks err as the error of a service that cannot be reached
// for now: it matches [ErrUnavailable] with errors.Is and keeps err's
// message and chain. Store and broker adapters mark the errors of a lost
// connection with it. Unavailable(nil) is nil.
func Unavailable(err error) error {
	if err == nil || errors.Is(err, ErrUnavailable) {
		return err
	}
	return &unavailableError{err}
}

// IsUnavailable reports whether err is the error of a service that cannot
// be reached for now: marked with [Unavailable], or a network error that
// says so (a connection refused, reset or aborted, a broken pipe, an
// unreachable host or network, a dial or I/O timeout). An error marked
// [Permanent] is not, whatever it wraps.
func IsUnavailable(err error) bool {
	if err == nil || IsPermanent(err) {
		return false
	}
	if errors.Is(err, ErrUnavailable) {
		return true
	}
	for _, errno := range outageErrnos {
		if errors.Is(err, errno) {
			return true
		}
	}
	var op *net.OpError
	if errors.As(err, &op) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// outageErrnos are the system errors of a service that is down or out of
// reach.
var outageErrnos = []error{
	syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ECONNABORTED, syscall.EPIPE,
	syscall.EHOSTUNREACH, syscall.ENETUNREACH, syscall.ENETDOWN, syscall.ETIMEDOUT,
}
