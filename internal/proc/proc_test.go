//go:build unix

package proc_test

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/calf-go/calf/internal/proc"
	"github.com/calf-go/calf/internal/testwait"
)

// Kill reaches the processes the command started, not only the command.
// The child holds a FIFO open for writing while it lives: the test reads
// its first byte once it has started, and the end of the FIFO once it is
// gone, when it can no longer write the file it would write later.
func TestKillReachesTheGroup(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "alive")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// Opened without blocking, the reader does not wait for a writer.
	alive, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer alive.Close()
	if err := alive.SetReadDeadline(time.Now().Add(20 * time.Second)); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sh", "-c", "(exec 3>"+fifo+"; echo x >&3; sleep 1; touch "+filepath.Join(dir, "late")+") & sleep 30")
	proc.Group(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Until the child opens it, the FIFO reads as ended.
	testwait.ForErr(t, 20*time.Second, "the child to start", func() error {
		n, err := alive.Read(make([]byte, 1))
		if n == 1 {
			return nil
		}
		if err == nil {
			err = io.EOF
		}
		return err
	})
	if err := proc.Kill(cmd); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if _, err := io.ReadAll(alive); err != nil {
		t.Fatalf("the child of the killed command still holds its FIFO: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "late")); err == nil {
		t.Error("a child of the killed command lived on")
	}
	if err := proc.Kill(&exec.Cmd{}); err != nil {
		t.Errorf("Kill of a command that did not start: %v", err)
	}
}
