// Package builtin provides ready-made tools for agents.
//
// [ReadOnly] returns safe, read-only file tools confined to one directory,
// such as the working directory of a one-shot command:
//
//   - read_file reads a text file, numbered lines, with an offset and a
//     limit in lines;
//   - list_dir lists a directory;
//   - glob finds paths by pattern ("*.go", "docs/**/*.md");
//   - grep searches text files with a regular expression.
//
// None of them writes, runs anything or touches the network. They open the
// directory with [os.OpenRoot] for each call, so a path that leads outside
// it, through "..", as an absolute path elsewhere, or through a symbolic
// link that points outside, is refused with an error matching
// [ErrOutsideRoot] rather than followed. They skip .git directories and
// binary files, and bound their output: see [Options] for the limits and
// their defaults. Errors are returned from the tools' functions with
// messages written for the model, which an agent sends back as the tool's
// error result.
package builtin
