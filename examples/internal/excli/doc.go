// Package excli is the command line that the example programs share: a
// -model flag, the task taken from the arguments, a context that Ctrl-C
// cancels, the model configured from the environment, and the exit codes.
// Each example's own code is its run function.
package excli
