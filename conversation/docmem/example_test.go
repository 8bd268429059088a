package docmem_test

import (
	"context"
	"fmt"

	"github.com/calf-go/calf/conversation/docmem"
	storemem "github.com/calf-go/calf/store/memory"
)

func ExampleMemory_Handle() {
	ctx := context.Background()
	st := storemem.New()
	defer st.Close()
	mem := docmem.New(st, nil)
	conv := "0b6f3c3e-8d1a-4c59-9f0e-2a1b3c4d5e6f"
	for _, cmd := range []string{
		`{"command":"create","id":"c1","doc":"project-notes","text":"Project notes"}`,
		`{"command":"append","id":"c2","doc":"project-notes","parent":"root","text":"Decisions"}`,
		`{"command":"append","id":"c3","doc":"project-notes","parent":"n1","text":"Use PostgreSQL."}`,
		`{"command":"append","id":"c3","doc":"project-notes","parent":"n1","text":"Use PostgreSQL."}`,
		`{"command":"move","id":"c4","doc":"project-notes","node":"n1","parent":"n2"}`,
	} {
		res, err := mem.Handle(ctx, conv, []byte(cmd))
		if err != nil {
			panic(err)
		}
		fmt.Printf("ok=%v node=%q duplicate=%v code=%q\n", res.OK, res.Node, res.Duplicate, res.Code)
	}
	res, _ := mem.Handle(ctx, conv, []byte(`{"command":"read","doc":"project-notes"}`))
	fmt.Print(res.Text)
	// Output:
	// ok=true node="root" duplicate=false code=""
	// ok=true node="n1" duplicate=false code=""
	// ok=true node="n2" duplicate=false code=""
	// ok=true node="n2" duplicate=true code=""
	// ok=false node="" duplicate=false code="move_into_itself"
	// # Project notes
	//
	// ## Decisions
	//
	// Use PostgreSQL.
}
