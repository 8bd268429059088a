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
// [Edit] returns the tools that change files in the same kind of
// directory:
//
//   - write_file creates or replaces a file, and returns a unified diff of
//     what it replaced;
//   - edit_file replaces an exact string that occurs once in a file (or
//     every occurrence, with replace_all), and returns the diff.
//
// [Bash] returns the bash tool, which runs a shell command in the
// directory with a time limit (the command and every process it started are
// killed at it), a bound on the output returned, and a minimal environment
// that passes none of the process's variables on. Where bubblewrap works
// (Debian's bubblewrap package), commands run in a sandbox: no network,
// of the file system only the directory, the system's programs and
// libraries read-only and a private /tmp (no home directory, no store, no
// other user's data), their own process namespace; [BashTool.Sandboxed]
// says whether they do and lists what they see, and
// [SandboxRequired] refuses to make the tool without one. An unsandboxed
// command can do whatever the process's user can.
//
// [WebFetch] returns the web_fetch tool, which GETs an http or https URL
// and returns the page as text (HTML as Markdown). It reaches only public
// addresses: loopback, private, link-local (cloud metadata services among
// them) and reserved addresses are refused with [ErrForbiddenAddress],
// checked on the address each connection goes to after DNS resolution, so
// also for names that resolve to them and on every redirect;
// [FetchOptions.Allow] opens chosen ranges. Time, bytes read, text
// returned and redirects are bounded.
//
// [WebSearch] returns the web_search tool over a [SearchProvider]:
// [SearXNG] queries a self-hosted SearXNG instance through its JSON API,
// and [SearchFunc] makes a provider, or a fake for tests, of a function.
//
// Each tool declares its [tool.Kind]: the read-only tools are
// [tool.KindRead], the edit tools [tool.KindEdit], bash
// [tool.KindExecute], web_fetch and web_search [tool.KindNetwork].
//
// The read-only tools write nothing, run nothing and touch no network.
// All of them open the directory with [os.OpenRoot] for each call, so a
// path that leads outside it, through "..", as an absolute path elsewhere,
// or through a symbolic link that points outside, is refused with an error
// matching [ErrOutsideRoot] rather than followed. They refuse .git
// directories and binary files, and bound what they read, write and
// return: see [Options] for the limits and their defaults. The edit tools
// write a file whole through a temporary file renamed over it, and refuse
// to write through a symbolic link. Errors are returned from the tools' functions with
// messages written for the model, which an agent sends back as the tool's
// error result.
package builtin
