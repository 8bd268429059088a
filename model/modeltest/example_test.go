package modeltest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
)

func ExampleTestModel() {
	m := modeltest.NewTestModel(
		modeltest.ToolCalls(modeltest.Call("call_1", "weather", `{"city":"Paris"}`)),
		modeltest.Text("It is sunny in Paris."),
	)
	ctx := context.Background()
	req := &model.Request{Messages: []model.Message{model.UserMessage("Weather in Paris?")}}

	first, _ := m.Generate(ctx, req)
	fmt.Println(first.Message.ToolCalls[0].Name, first.Message.ToolCalls[0].Arguments)

	second, _ := m.Generate(ctx, req)
	fmt.Println(second.Message.Text())

	_, err := m.Generate(ctx, req)
	fmt.Println(err)
	fmt.Println(m.Calls(), "calls")
	// Output:
	// weather {"city":"Paris"}
	// It is sunny in Paris.
	// modeltest: script exhausted after 2 calls
	// 3 calls
}

func ExampleTestModel_GenerateStream() {
	m := modeltest.NewTestModel(modeltest.Text("Streams arrive word by word."))
	for chunk, err := range m.GenerateStream(context.Background(), &model.Request{}) {
		if err != nil {
			fmt.Println(err)
			return
		}
		if chunk.Delta != nil {
			fmt.Printf("%q\n", chunk.Delta.Text)
		}
	}
	// Output:
	// "Streams"
	// " arrive"
	// " word"
	// " by"
	// " word."
}

func ExampleNewServer() {
	srv := modeltest.NewServer(func(ctx context.Context, req *model.Request) (*model.Response, error) {
		return modeltest.Text("You said: " + req.Messages[len(req.Messages)-1].Text()), nil
	})
	defer srv.Close()

	body := `{"model":"any","messages":[{"role":"user","content":"hello"}]}`
	resp, err := http.Post(srv.URL()+"/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	var completion struct {
		Choices []struct {
			Message struct{ Content string }
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&completion); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(completion.Choices[0].Message.Content)
	// Output: You said: hello
}
