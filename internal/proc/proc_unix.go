//go:build unix

package proc

import (
	"os/exec"
	"syscall"
)

// Group makes cmd, before it starts, the leader of a new process group, so
// that [Kill] reaches every process it starts.
func Group(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
}

// Kill kills the process group of cmd, started after [Group]. It does
// nothing for a command that did not start.
func Kill(cmd *exec.Cmd) error {
	if cmd.Process == nil {
		return nil
	}
	return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
}
