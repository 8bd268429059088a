//go:build !unix

package proc

import "os/exec"

// Group does nothing where there are no process groups.
func Group(cmd *exec.Cmd) {}

// Kill kills the process of cmd; the processes it started are not reached
// where there are no process groups.
func Kill(cmd *exec.Cmd) error {
	if cmd.Process == nil {
		return nil
	}
	return cmd.Process.Kill()
}
