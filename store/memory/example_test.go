package memory_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/store/memory"
)

func ExampleNew() {
	ctx := context.Background()
	s := memory.New()
	defer s.Close()

	v, _ := s.Put(ctx, store.KindRun, "run-1", []byte(`{"step":1}`), 0)
	fmt.Println("created version", v)

	// A write with a stale version is refused.
	_, err := s.Put(ctx, store.KindRun, "run-1", []byte(`{"step":9}`), 0)
	fmt.Println(errors.Is(err, store.ErrConflict))

	v, _ = s.Put(ctx, store.KindRun, "run-1", []byte(`{"step":2}`), v)
	rec, _ := s.Get(ctx, store.KindRun, "run-1")
	fmt.Println(rec.Version, v, string(rec.Data))
	// Output:
	// created version 1
	// true
	// 2 2 {"step":2}
}
