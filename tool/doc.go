// Package tool defines the tools a model can call and builds them from Go
// functions.
//
// A [Tool] has a [model.ToolDefinition] (name, description and the JSON
// Schema of its arguments) and a Call method that takes the arguments as
// the model sent them. [New] makes a tool from a typed function: the schema
// is inferred from the input type, the arguments are validated against it
// before the function runs, and the function's output is converted into a
// [Result]. [NewRaw] makes one from a hand-written schema.
//
//	type WeatherArgs struct {
//		City string `json:"city" jsonschema:"the city, such as Paris"`
//		Unit string `json:"unit,omitempty" enum:"celsius,fahrenheit"`
//	}
//
//	weather := tool.Must(tool.New("weather", "Current weather in a city",
//		func(ctx context.Context, in WeatherArgs) (string, error) { ... }))
//
// # Bad arguments
//
// Models make mistakes. Arguments that are not valid JSON, or that do not
// follow the schema (a missing required property, a wrong type, an unknown
// property, a value outside an enum), make Call return an [*ArgumentError]
// without running the function. Its message names every failing property
// at once, with the path of the failing value ("home.city"), and is meant
// to be sent back to the model as the tool's error result, so that it can
// correct the call in one round trip:
//
//	invalid arguments for tool "book": 3 problems:
//	- required: missing properties: ["rooms"]
//	- property "guest": type: 7 has type "integer", want "string"
//	- property "nights": type: two has type "string", want "integer"
//
// [Schema.Validate] returns a [*ValidationError] for one violation and a
// [ValidationErrors] for several. Each property is checked against its own
// schema, and the object's required, unknown and other properties against
// the rest; a hand-written schema with a $ref to anything but its $defs or
// definitions (to the whole schema, or to another property) is checked as
// a whole, and reports its first violation only.
//
// # Results
//
// A [Result] holds the parts the model is shown, a structured value, and
// Metadata for the application, which the model never sees. [FileResult]
// shows the model a file: text as text labelled with its path, an image
// as an image part, and refuses other content with [ErrUnreadableFile].
//
// # Structured output
//
// [SchemaFor] infers the schema of a Go type for a model's structured
// output, caches it per type, and validates the model's answer with
// [Schema.Validate]. Providers require an object at the top level, so a
// non-object type such as []int is wrapped in {"output": ...}; see
// [Schema.Wrapped] and [Schema.Unwrap].
//
// # Sets
//
// A [Set] holds an agent's tools by name, in order, and lists their
// definitions for a model request.
package tool
