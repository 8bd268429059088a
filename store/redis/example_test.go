package redis_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/alicebob/miniredis/v2"

	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/store/redis"
)

func ExampleOpen() {
	// An in-process server for the example; programs give the URL of
	// theirs, such as redis://127.0.0.1:6379/0.
	m, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()

	ctx := context.Background()
	s, err := redis.Open(ctx, "redis://"+m.Addr()+"/0", &redis.Options{KeyPrefix: "myapp:"})
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

	rec, err := s.Get(ctx, store.KindSession, "chat-1")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(rec.Version, string(rec.Data))
	// Output:
	// true
	// 2 hello, world
}
