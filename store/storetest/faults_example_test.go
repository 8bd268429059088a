package storetest_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/store/memory"
	"github.com/calf-go/calf/store/storetest"
)

// A store whose second write fails, and whose third races another writer.
func ExampleWithFaults() {
	s := storetest.WithFaults(memory.New(), storetest.Faults{
		Inject: func(c storetest.Call) storetest.Fault {
			switch {
			case c.Op == storetest.OpPut && c.N == 2:
				return storetest.Fail
			case c.Op == storetest.OpPut && c.N == 3:
				return storetest.ConcurrentWrite
			}
			return storetest.NoFault
		},
	})
	defer s.Close()
	ctx := context.Background()

	v, err := s.Put(ctx, "run", "r1", []byte(`{"step":1}`), 0)
	fmt.Println(v, err)
	_, err = s.Put(ctx, "run", "r1", []byte(`{"step":2}`), v)
	fmt.Println(errors.Is(err, storetest.ErrInjected))
	_, err = s.Put(ctx, "run", "r1", []byte(`{"step":2}`), v)
	fmt.Println(errors.Is(err, store.ErrConflict))
	// What store.Update does on a conflict: read again, write again.
	rec, _ := s.Get(ctx, "run", "r1")
	v, err = s.Put(ctx, "run", "r1", []byte(`{"step":2}`), rec.Version)
	fmt.Println(v, err, s.Stats())
	// Output:
	// 1 <nil>
	// true
	// true
	// 3 <nil> {1 0 0 1 0}
}
