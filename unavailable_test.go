package calf_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/calf-go/calf"
)

func TestIsUnavailable(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}
	tests := []struct {
		err  error
		want bool
	}{
		{nil, false},
		{errors.New("boom"), false},
		{io.EOF, false},
		{fmt.Errorf("load run: %w", refused), true},
		{fmt.Errorf("write: %w", syscall.ECONNRESET), true},
		{fmt.Errorf("write: %w", syscall.EPIPE), true},
		{calf.Unavailable(errors.New("pool closed")), true},
		{fmt.Errorf("store: %w", calf.Unavailable(io.ErrUnexpectedEOF)), true},
		{calf.Permanent(refused), false},
		{calf.Permanent(calf.Unavailable(io.EOF)), false},
		{fmt.Errorf("publish: %w", context.DeadlineExceeded), true},
		{context.Canceled, false},
	}
	for _, tt := range tests {
		if got := calf.IsUnavailable(tt.err); got != tt.want {
			t.Errorf("IsUnavailable(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
	if calf.Unavailable(nil) != nil {
		t.Error("Unavailable(nil) is not nil")
	}
	err := calf.Unavailable(io.ErrUnexpectedEOF)
	if !errors.Is(err, io.ErrUnexpectedEOF) || !errors.Is(err, calf.ErrUnavailable) || err.Error() != io.ErrUnexpectedEOF.Error() {
		t.Errorf("Unavailable lost its cause or message: %v", err)
	}
}
