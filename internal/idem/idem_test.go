package idem_test

import (
	"errors"
	"testing"
	"time"

	"github.com/calf-go/calf/internal/idem"
	storemem "github.com/calf-go/calf/store/memory"
)

// Claim names the first request's run; another request is a conflict;
// Release frees a key only for the run that claimed it.
func TestClaimRelease(t *testing.T) {
	ctx := t.Context()
	s := storemem.New()
	now := time.Date(2026, 12, 7, 8, 0, 0, 0, time.UTC)
	a, b := idem.Digest([]byte("a")), idem.Digest([]byte("b"))
	if run, err := idem.Claim(ctx, s, "sc", "k", a, "run-1", now, time.Hour); err != nil || run != "run-1" {
		t.Fatalf("first claim: %s, %v", run, err)
	}
	if run, err := idem.Claim(ctx, s, "sc", "k", a, "run-2", now, time.Hour); err != nil || run != "run-1" {
		t.Errorf("the same request again: %s, %v; want run-1", run, err)
	}
	if _, err := idem.Claim(ctx, s, "sc", "k", b, "run-3", now, time.Hour); !errors.Is(err, idem.ErrConflict) {
		t.Errorf("another request: %v, want ErrConflict", err)
	}
	if err := idem.Release(ctx, s, "sc", "k", "run-2"); err != nil {
		t.Fatal(err)
	}
	if run, err := idem.Claim(ctx, s, "sc", "k", a, "run-4", now, time.Hour); err != nil || run != "run-1" {
		t.Errorf("after another run's release: %s, %v; want run-1", run, err)
	}
	if err := idem.Release(ctx, s, "sc", "k", "run-1"); err != nil {
		t.Fatal(err)
	}
	if run, err := idem.Claim(ctx, s, "sc", "k", b, "run-5", now, time.Hour); err != nil || run != "run-5" {
		t.Errorf("after its run's release: %s, %v; want run-5", run, err)
	}
	if err := idem.Release(ctx, s, "sc", "none", "run-1"); err != nil {
		t.Errorf("releasing a key not in use: %v", err)
	}
}
