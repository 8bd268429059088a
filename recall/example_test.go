package recall_test

import (
	"context"
	"fmt"
	"log"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/recall"
	storemem "github.com/calf-go/calf/store/memory"
)

func ExampleNewVector() {
	ctx := context.Background()
	// In production: openai.NewEmbedder(openai.Options{Model: "text-embedding-3-small"}),
	// and the workers' store.
	mem, err := recall.NewVector(storemem.New(), modeltest.HashEmbedder{}, &recall.VectorOptions{K: 1})
	if err != nil {
		log.Fatal(err)
	}
	if err := mem.Add(ctx,
		recall.Item{Text: "The deploy key rotates every 90 days."},
		recall.Item{Text: "Lunch is at noon on Fridays."},
	); err != nil {
		log.Fatal(err)
	}
	found, err := mem.Query(ctx, "when does the deploy key rotate", 1)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(found[0].Text)
	// An agent that remembers: before a run's first model call, the
	// nearest items to the question are added after its instructions.
	_ = agent.Options{Memory: []agent.Memory{mem}}
	// Output: The deploy key rotates every 90 days.
}
