package tokens_test

import (
	"fmt"

	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/tokens"
)

func ExampleForModel() {
	count, exact := tokens.ForModel("openai:gpt-4o-mini")
	fmt.Println(count(model.UserMessage("hello world")), exact)
	// Output: 6 true
}
