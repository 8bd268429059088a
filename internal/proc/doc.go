// Package proc starts commands in a process group of their own and kills
// the group whole, where the system has process groups (Unix); elsewhere
// it kills the command's process alone.
package proc
