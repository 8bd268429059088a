package main

import (
	"context"
	"os"

	"github.com/calf-go/calf/model/modeltest"
)

// Main runs the calf command. Here it runs one prompt against a fake
// OpenAI-compatible server that echoes the prompt back.
func ExampleMain() {
	srv := modeltest.NewServer(nil)
	defer srv.Close()
	args := []string{"run", "--store", "memory:", "--model", srv.URL() + "#echo", "Hello, calf!"}
	code := Main(context.Background(), args, os.Stdin, os.Stdout, os.Stderr)
	if code != 0 {
		panic(code)
	}
	// Output: Hello, calf!
}
