// Package gemini is the [model.Model] for Google's Gemini models through
// the Generative Language API: generateContent, and
// streamGenerateContent?alt=sse for streaming. It speaks the API's JSON
// over Calf's shared model transport, with no SDK.
//
//	m, err := gemini.New(gemini.Options{Model: "gemini-2.5-flash"}) // key from GEMINI_API_KEY
//	m, err := gemini.FromEnv("gemini-2.5-flash")
//	m, err := gemini.New(gemini.Options{Model: "gemini-2.5-pro", ThinkingBudget: gemini.ThinkingDynamic})
//
// # Configuration
//
// [Options.APIKey] defaults to $GEMINI_API_KEY, else $GOOGLE_API_KEY; the
// key travels in the x-goog-api-key header, never in the URL. Without a
// key, [New] fails with an error that matches [model.ErrNoModel] and says
// to set GEMINI_API_KEY. [Options.BaseURL] defaults to $GEMINI_BASE_URL,
// else https://generativelanguage.googleapis.com, and [Options.APIVersion]
// to v1beta. [Options.ThinkingBudget] sets generationConfig.thinkingConfig:
// a positive budget (or [ThinkingDynamic]) also asks for thought
// summaries (includeThoughts); [ThinkingOff] sends a budget of 0; the
// default sends nothing.
//
// # Requests
//
// System messages become the systemInstruction (text only); user messages
// are "user" contents and assistant messages "model" contents. Images
// given inline, or as data URLs, are sent as inlineData; other URLs (https,
// gs://, files of the Files API) as fileData. A tool call is a
// functionCall part with its arguments as an object (arguments that are
// not a JSON object, such as a malformed call of another provider's model,
// go as {"arguments": text}) and its id, whoever gave it (Gemini, another
// provider, a conversation built by hand), on the call and on its
// functionResponse; only an id this package made for a call Gemini gave
// without one (call_ and 16 hex digits) is left out, as the model sent it.
// Tool results are functionResponse parts, the results of one turn
// together in one "user" content, their images after them. The response
// object of a result is the result itself when its text is a JSON object,
// else {"result": value}, the value being the JSON the text holds or the
// text as a string; a result that reports an error ([model.Message]
// IsError) is {"error": value}, the key the API documents for a failed
// call.
//
// Tools are functionDeclarations with their parameters translated to
// Gemini's schema (see Schemas); a tool without parameters has none. The
// tool choice is toolConfig.functionCallingConfig: auto (the default,
// sent as nothing), NONE, ANY for required, and ANY with
// allowedFunctionNames for one named tool. The temperature and the token
// limit are generationConfig's temperature and maxOutputTokens. An output
// schema ([model.Request.Output]) is responseMimeType application/json
// with the translated responseSchema (an output without a schema asks for
// JSON alone). Gemini models before 3 refuse a JSON response type in a
// request with function declarations; when the API says so, the request
// is sent again with the schema as an instruction in the system
// instruction, and so are the Model's later requests with both (the agent
// validates the answer; a Markdown code fence around it is removed).
// [model.Request.ParallelToolCalls] has no counterpart in the API and is
// not sent.
//
// # Thinking and thought signatures
//
// Gemini 2.5 and later models sign parts of their answers: a function
// call, the text, a thought carries a thoughtSignature, which the API
// requires back, unchanged, on the same part when the conversation goes
// on. Thought summaries (text parts with thought: true) become
// [model.PartThinking] parts with Provider "gemini" and their Signature; a
// function call's signature is kept in [model.ToolCall.Signature] and a
// text part's in [model.Part.Signature], with Provider "gemini". Each goes
// back on its part. A request's messages pass through [model.ForProvider]
// first, so another provider's thinking and signatures are left out; a
// Gemini conversation continued on another provider loses only its
// thoughts and signatures. In a stream, the text of successive chunks
// makes one part, up to a part with a signature (a signature that comes
// alone, on an empty text part, belongs to the text before it).
//
// Gemini 3 refuses a function call of the current turn without its
// signature. A call that has none (another provider's, or one the program
// made) goes with [SkipSignature], the placeholder Google documents for
// that case, on the first call of each model step of the current turn;
// signatures the model gave are never replaced, and Gemini 1 and 2 models
// (and models not named gemini-..., such as Gemma) get none.
//
// # Responses
//
// The first candidate becomes the [model.Response]: its text, thoughts and
// function calls (with the model's id, or, when it gave none, an id made
// from the response id and the call, the same each time the response is
// read), the model version as Model and the response id as ID. Finish
// reasons: STOP is [model.FinishStop], or [model.FinishToolCalls] when
// the response calls functions; MAX_TOKENS is [model.FinishLength]; SAFETY,
// RECITATION, BLOCKLIST, PROHIBITED_CONTENT, SPII, LANGUAGE and the image
// ones are a *[BlockedError], as is a prompt blocked
// (promptFeedback.blockReason); others ([model.FinishOther]) are an error
// matching [ErrEmptyResponse] when the response has nothing in it (a
// malformed function call, for instance). Usage: promptTokenCount is
// InputTokens, cachedContentTokenCount CachedInputTokens,
// candidatesTokenCount plus thoughtsTokenCount OutputTokens (thinking is
// billed as output), thoughtsTokenCount ReasoningTokens, totalTokenCount
// TotalTokens; one request. Enumerations are read as names or, as some
// clients ask for them, as numbers.
//
// Streaming ([Model.GenerateStream]) yields text and thinking deltas as
// they come; Gemini sends each function call whole, so each comes as one
// [model.ToolCallDelta] with its index, id, name and arguments. The
// complete response comes last, the same that [Model.Generate] returns. A
// stream that ends before its last chunk is an error, never a truncated
// response.
//
// # Schemas
//
// Gemini takes a subset of OpenAPI 3.0's schema, not JSON Schema. Tool
// parameters and output schemas are translated: type (upper case, one
// type; "null" in a list of types, a {"type": "null"} alternative or a
// null in an enum make the schema nullable), format (those the API knows:
// date-time, float, double, int32, int64; others, annotations in JSON
// Schema, are dropped), title, description, nullable, enum (of strings),
// items, properties (in their order, with propertyOrdering in an output
// schema), required, minItems, maxItems, minProperties, maxProperties,
// minimum, maximum (an exclusive bound of an integer becomes the next
// integer), minLength, maxLength, pattern, and anyOf. References to the
// schema's own definitions ($ref to #/$defs/..., #/definitions/...) are
// expanded; allOf is merged into one schema; oneOf becomes anyOf when its
// alternatives have different types. additionalProperties: false (or
// true) is dropped: Gemini's objects have their named properties only.
// Annotations (default, examples, $comment...) are dropped.
//
// What the dialect cannot say is an error, a *[SchemaError] that names the
// JSON pointer of the keyword: a recursive $ref, a reference outside the
// schema, additionalProperties with a schema (a map), patternProperties,
// propertyNames, const, not, if/then/else, dependent keywords, tuples
// (prefixItems, items as a list), contains, multipleOf, uniqueItems, an
// enum of other values than strings, several types in one schema, oneOf
// whose alternatives may overlap, an allOf whose parts conflict, and a
// schema with no type (true, {}: any value). [Model.CheckSchema]
// implements [model.SchemaChecker], so agent.New and Agent.AddTool refuse
// such a tool or output type when the agent is built.
//
// # Errors, retries and timeouts
//
// Rate limits (429), timeouts (408), conflicts (409), server errors (5xx)
// and connection errors are retried with exponential backoff, up to
// [Options.MaxRetries] times, after the delay the server asks for: a
// Retry-After header, or the retryDelay of the error's RetryInfo. An
// HTTP error that remains is a *[model.StatusError] whose Type is the
// API's status (INVALID_ARGUMENT, RESOURCE_EXHAUSTED...) and whose Code is
// the reason of its ErrorInfo (API_KEY_INVALID...) or the HTTP code; it
// matches [model.ErrRateLimited], [model.ErrOverloaded],
// [model.ErrContextTooLong], [model.ErrAuthentication] (an invalid key,
// which the API answers with a 400, included) or
// [model.ErrInvalidRequest]. An error the API sends in a stream in place
// of a chunk is a *[model.StatusError] too. Each attempt is bounded by
// [Options.Timeout]; a call that runs out of time matches
// [model.ErrTimeout].
//
// # Embeddings
//
// [NewEmbedder] returns a [model.Embedder] on batchEmbedContents, for
// embedding models such as gemini-embedding-001.
package gemini
