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
