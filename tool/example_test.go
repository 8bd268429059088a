package tool_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/calf-go/calf/tool"
)

func ExampleNew() {
	type WeatherArgs struct {
		City string `json:"city" jsonschema:"the city, such as Paris"`
		Unit string `json:"unit,omitempty" enum:"celsius,fahrenheit"`
	}
	weather, err := tool.New("get_weather", "Get the current weather in a city.",
		func(ctx context.Context, in WeatherArgs) (string, error) {
			if in.Unit == "" {
				in.Unit = "celsius"
			}
			return fmt.Sprintf("22 degrees %s in %s", in.Unit, in.City), nil
		})
	if err != nil {
		panic(err)
	}
	fmt.Println(string(weather.Definition().Parameters))

	res, err := weather.Call(context.Background(), json.RawMessage(`{"city":"Paris"}`))
	fmt.Println(res.Text(), err)

	// Bad arguments are reported for the model, and the function does not run.
	_, err = weather.Call(context.Background(), json.RawMessage(`{"city":"Paris","unit":"kelvin"}`))
	fmt.Println(err)
	// Output:
	// {"type":"object","properties":{"city":{"type":"string","description":"the city, such as Paris"},"unit":{"type":"string","enum":["celsius","fahrenheit"]}},"required":["city"],"additionalProperties":false}
	// 22 degrees celsius in Paris <nil>
	// invalid arguments for tool "get_weather": property "unit": enum: kelvin does not equal any of: [celsius fahrenheit]
}

func ExampleSchemaFor() {
	// A list is not an object, so its schema is wrapped in {"output": ...}.
	s, err := tool.SchemaFor[[]int]()
	if err != nil {
		panic(err)
	}
	answer := json.RawMessage(`{"output":[3,1,2]}`)
	if err := s.Validate(answer); err != nil {
		panic(err)
	}
	data, _ := s.Unwrap(answer)
	var nums []int
	_ = json.Unmarshal(data, &nums)
	fmt.Println(s.Wrapped(), nums)

	fmt.Println(s.Validate(json.RawMessage(`{"output":["three"]}`)))
	// Output:
	// true [3 1 2]
	// property "output[]": type: three has type "string", want "integer"
}

func ExampleSet() {
	greet := tool.Must(tool.New("greet", "Greet someone.",
		func(_ context.Context, in struct {
			Name string `json:"name"`
		}) (string, error) {
			return "Hello, " + in.Name, nil
		}))
	var tools tool.Set
	if err := tools.Add(greet); err != nil {
		panic(err)
	}
	res, err := tools.Call(context.Background(), "greet", json.RawMessage(`{"name":"Ada"}`))
	fmt.Println(tools.Names(), res.Text(), err)
	_, err = tools.Call(context.Background(), "shout", nil)
	fmt.Println(err)
	// Output:
	// [greet] Hello, Ada <nil>
	// tool: unknown tool "shout"
}

// Arguments that break the schema in several places get one error that
// lists them all, for the model to correct in one go.
func ExampleValidationErrors() {
	type Booking struct {
		Guest  string `json:"guest"`
		Nights int    `json:"nights"`
		Rooms  int    `json:"rooms"`
	}
	book := tool.Must(tool.New("book", "Book rooms.", func(_ context.Context, in Booking) (string, error) {
		return "booked", nil
	}))
	_, err := book.Call(context.Background(), json.RawMessage(`{"guest": 7, "nights": "two"}`))
	fmt.Println(err)
	// Output:
	// invalid arguments for tool "book": 3 problems:
	// - required: missing properties: ["rooms"]
	// - property "guest": type: 7 has type "integer", want "string"
	// - property "nights": type: two has type "string", want "integer"
}
