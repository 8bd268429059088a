package sqlite_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/store/sqlite"
)

func ExampleOpen() {
	dir, err := os.MkdirTemp("", "calf-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "calf.db") // programs use sqlite.DefaultPath()

	ctx := context.Background()
	s, err := sqlite.Open(path, nil)
	if err != nil {
		log.Fatal(err)
	}
	v, err := s.Put(ctx, store.KindSession, "chat-1", []byte("hello"), 0)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := s.Put(ctx, store.KindSession, "chat-1", []byte("hello, world"), v); err != nil {
		log.Fatal(err)
	}
	s.Close()

	// The records outlive the Store.
	s, err = sqlite.Open(path, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	rec, err := s.Get(ctx, store.KindSession, "chat-1")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(rec.Version, string(rec.Data))
	// Output:
	// 2 hello, world
}
