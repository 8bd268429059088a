package reactive_test

import (
	"context"
	"fmt"
	"log"

	"github.com/calf-go/calf/reactive"
)

// A store with one action and a subscriber to one path.
func ExampleNewStore() {
	type todo struct {
		Items []string `json:"items"`
		Done  int      `json:"done"`
	}
	a := &reactive.Actions[todo]{}
	reactive.MustAction(a, "add", func(s todo, item string) (todo, []string, error) {
		s.Items = append(append([]string(nil), s.Items...), item) // copy on write
		return s, []string{"items"}, nil
	})
	store, err := reactive.NewStore("todo", todo{}, a, nil)
	if err != nil {
		log.Fatal(err)
	}
	store.Subscribe("items", func(d *reactive.Delta) {
		fmt.Printf("v%d %s: %s -> %s\n", d.Version, d.Action, d.Before["items"], d.After["items"])
	})
	ctx := context.Background()
	if _, err := store.Dispatch(ctx, "add", "milk"); err != nil {
		log.Fatal(err)
	}
	if _, err := store.Dispatch(ctx, "add", "bread"); err != nil {
		log.Fatal(err)
	}
	if _, err := store.Undo(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println(store.Get().Items)
	// Output:
	// v1 add: null -> ["milk"]
	// v2 add: ["milk"] -> ["milk","bread"]
	// v3 undo: ["milk","bread"] -> ["milk"]
	// [milk]
}
