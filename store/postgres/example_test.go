package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/store/postgres"
)

// Workers of one deployment open the same database and schema; each Open
// brings the schema up to date.
func ExampleOpen() {
	ctx := context.Background()
	s, err := postgres.Open(ctx, "postgres://calf@127.0.0.1:5432/calf", &postgres.Options{Schema: "myapp"})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	v, err := s.Put(ctx, store.KindSession, "chat-1", []byte("hello"), 0)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := s.Put(ctx, store.KindSession, "chat-1", []byte("hello, world"), v); err != nil {
		log.Fatal(err)
	}
	// A write with a stale version is refused.
	_, err = s.Put(ctx, store.KindSession, "chat-1", []byte("lost"), v)
	fmt.Println(errors.Is(err, store.ErrConflict))
}
