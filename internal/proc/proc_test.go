//go:build unix

package proc_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/calf-go/calf/internal/proc"
)

// Kill reaches the processes the command started, not only the command.
func TestKillReachesTheGroup(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command("/bin/sh", "-c", "(sleep 1; touch "+filepath.Join(dir, "late")+") & sleep 30")
	proc.Group(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if err := proc.Kill(cmd); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	time.Sleep(1500 * time.Millisecond)
	if _, err := os.Stat(filepath.Join(dir, "late")); err == nil {
		t.Error("a child of the killed command lived on")
	}
	if err := proc.Kill(&exec.Cmd{}); err != nil {
		t.Errorf("Kill of a command that did not start: %v", err)
	}
}
