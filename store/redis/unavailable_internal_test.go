package redis

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/store/adapter"
)

// replyError is an error reply of the server, as go-redis returns it.
type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}

func TestUnavailable(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{io.EOF, true},
		{fmt.Errorf("read: %w", io.ErrUnexpectedEOF), true},
		{goredis.ErrPoolTimeout, true},
		{replyError("LOADING Redis is loading the dataset in memory"), true},
		{replyError("MASTERDOWN Link with MASTER is down"), true},
		{replyError("READONLY You can't write against a read only replica."), true},
		{errors.New("dial tcp 127.0.0.1:6390: connect: connection refused"), true},
		{replyError("ERR wrong number of arguments"), false},
		{replyError("NOSCRIPT No matching script"), false},
	}
	g := adapter.Guard{Name: "store/redis", Unavailable: unavailable}
	for _, tt := range tests {
		if got := unavailable(tt.err); got != tt.want {
			t.Errorf("unavailable(%v) = %v, want %v", tt.err, got, tt.want)
		}
		err := g.Fail(context.Background(), "get", tt.err)
		if got := errors.Is(err, calf.ErrUnavailable); got != tt.want {
			t.Errorf("Fail(%v) matches calf.ErrUnavailable: %v, want %v", tt.err, got, tt.want)
		}
	}
}
