package builtin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/calf-go/calf/tool"
	"github.com/calf-go/calf/tool/builtin"
)

func ExampleReadOnly() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	_ = os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("buy milk\ncall Ada\n"), 0o644)

	tools, err := builtin.ReadOnly(dir)
	if err != nil {
		panic(err)
	}
	set, _ := tool.NewSet(tools...)
	fmt.Println(set.Names())

	ctx := context.Background()
	res, _ := set.Call(ctx, "grep", json.RawMessage(`{"pattern":"Ada"}`))
	fmt.Print(res.Text())
	res, _ = set.Call(ctx, "read_file", json.RawMessage(`{"path":"notes.txt","limit":1}`))
	fmt.Print(res.Text())
	_, err = set.Call(ctx, "read_file", json.RawMessage(`{"path":"../etc/passwd"}`))
	fmt.Println(err)
	// Output:
	// [read_file list_dir glob grep]
	// notes.txt:2:call Ada
	//      1	buy milk
	// [the file goes on: read on with offset=2]
	// path is outside the working directory: "../etc/passwd"
}

func ExampleEdit() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	_ = os.WriteFile(filepath.Join(dir, "greet.go"), []byte("package greet\nconst Hello = \"hello\"\n"), 0o644)

	tools, err := builtin.Edit(dir)
	if err != nil {
		panic(err)
	}
	set, _ := tool.NewSet(tools...)
	ctx := context.Background()
	res, err := set.Call(ctx, "edit_file", json.RawMessage(`{"path":"greet.go","old_string":"\"hello\"","new_string":"\"hi\""}`))
	if err != nil {
		panic(err)
	}
	fmt.Print(res.Text())
	_, err = set.Call(ctx, "edit_file", json.RawMessage(`{"path":"greet.go","old_string":"goodbye","new_string":"x"}`))
	fmt.Println(err)
	// Output:
	// Edited "greet.go" (1 occurrence replaced):
	// --- a/greet.go
	// +++ b/greet.go
	// @@ -1,2 +1,2 @@
	//  package greet
	// -const Hello = "hello"
	// +const Hello = "hi"
	// old_string was not found in "greet.go": check it against the file's current content (read_file), whitespace and line breaks included
}

func ExampleBash() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)

	// SandboxAuto (the default) uses bubblewrap where it works; Sandboxed
	// says whether it does.
	sh, err := builtin.Bash(dir, &builtin.BashOptions{Sandbox: builtin.SandboxOff})
	if err != nil {
		panic(err)
	}
	res, err := sh.Call(context.Background(), json.RawMessage(`{"command":"echo hello | tr a-z A-Z; exit 2"}`))
	// A command that exits with another status than 0 is an error, which
	// goes back to the model; it has no result.
	fmt.Println(res == nil, err != nil)
	fmt.Println(tool.KindOf(sh), sh.Sandboxed())
	// Output:
	// true true
	// execute false
}
