package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/store/adapter"
)

func TestUnavailable(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{&pgconn.PgError{Code: "57P01", Message: "terminating connection due to administrator command"}, true},
		{&pgconn.PgError{Code: "57P03", Message: "the database system is starting up"}, true},
		{&pgconn.PgError{Code: "08006"}, true},
		{&pgconn.PgError{Code: "53300"}, true},
		{&pgconn.PgError{Code: "23505", Message: "duplicate key"}, false},
		{&pgconn.PgError{Code: "42P01", Message: "relation does not exist"}, false},
		{fmt.Errorf("read: %w", io.ErrUnexpectedEOF), true},
		{errors.New("conn closed"), true},
		{errors.New("syntax error"), false},
	}
	g := adapter.Guard{Name: "postgres", Unavailable: unavailable}
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
