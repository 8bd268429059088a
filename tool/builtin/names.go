package builtin

// names are the names of the built-in tools, sorted.
var names = []string{"bash", "edit_file", "glob", "grep", "list_dir", "read_file", "web_fetch", "web_search", "write_file"}

// Names returns the names of the built-in tools, sorted: the names a
// configuration file may list for an agent without writing Go.
func Names() []string { return append([]string(nil), names...) }
