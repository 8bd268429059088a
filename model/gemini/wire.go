package gemini

import (
	"encoding/json"
	"strconv"
)

// The wire types of the Generative Language API's generateContent,
// streamGenerateContent and batchEmbedContents methods: what this adapter
// sends and what it reads, nothing more.

type wireRequest struct {
	Contents          []wireContent         `json:"contents"`
	SystemInstruction *wireContent          `json:"systemInstruction,omitempty"`
	Tools             []wireTool            `json:"tools,omitempty"`
	ToolConfig        *wireToolConfig       `json:"toolConfig,omitempty"`
	GenerationConfig  *wireGenerationConfig `json:"generationConfig,omitempty"`
}

type wireContent struct {
	Role  string     `json:"role,omitempty"`
	Parts []wirePart `json:"parts"`
}

// wirePart is one part of a content: text (a thought when Thought is
// set), inline data, a file reference, a function call or a function
// response. ThoughtSignature is opaque base64 text, kept as it came.
type wirePart struct {
	Text             string                `json:"text,omitempty"`
	Thought          bool                  `json:"thought,omitempty"`
	ThoughtSignature string                `json:"thoughtSignature,omitempty"`
	InlineData       *wireBlob             `json:"inlineData,omitempty"`
	FileData         *wireFileData         `json:"fileData,omitempty"`
	FunctionCall     *wireFunctionCall     `json:"functionCall,omitempty"`
	FunctionResponse *wireFunctionResponse `json:"functionResponse,omitempty"`
}

type wireBlob struct {
	MIMEType string `json:"mimeType"`
	// Data is base64 text (the API's bytes in JSON).
	Data string `json:"data"`
}

type wireFileData struct {
	MIMEType string `json:"mimeType,omitempty"`
	FileURI  string `json:"fileUri"`
}

type wireFunctionCall struct {
	ID   string          `json:"id,omitempty"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args,omitempty"`
}

type wireFunctionResponse struct {
	ID       string          `json:"id,omitempty"`
	Name     string          `json:"name"`
	Response json.RawMessage `json:"response"`
}

type wireTool struct {
	FunctionDeclarations []wireFunctionDeclaration `json:"functionDeclarations"`
}

type wireFunctionDeclaration struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Parameters is the translated schema (see schema.go); absent for a
	// function without parameters.
	Parameters json.RawMessage `json:"parameters,omitempty"`
}

type wireToolConfig struct {
	FunctionCallingConfig wireFunctionCallingConfig `json:"functionCallingConfig"`
}

type wireFunctionCallingConfig struct {
	Mode                 string   `json:"mode"`
	AllowedFunctionNames []string `json:"allowedFunctionNames,omitempty"`
}

type wireGenerationConfig struct {
	Temperature      *float64            `json:"temperature,omitempty"`
	MaxOutputTokens  int                 `json:"maxOutputTokens,omitempty"`
	ResponseMIMEType string              `json:"responseMimeType,omitempty"`
	ResponseSchema   json.RawMessage     `json:"responseSchema,omitempty"`
	ThinkingConfig   *wireThinkingConfig `json:"thinkingConfig,omitempty"`
}

type wireThinkingConfig struct {
	ThinkingBudget  *int `json:"thinkingBudget,omitempty"`
	IncludeThoughts bool `json:"includeThoughts,omitempty"`
}

// wireResponse is a GenerateContentResponse: the whole answer of
// generateContent, or one chunk of a stream. Error is set instead when a
// stream reports an error in place of a chunk.
type wireResponse struct {
	Candidates     []wireCandidate     `json:"candidates"`
	PromptFeedback *wirePromptFeedback `json:"promptFeedback"`
	UsageMetadata  *wireUsage          `json:"usageMetadata"`
	ModelVersion   string              `json:"modelVersion"`
	ResponseID     string              `json:"responseId"`
	Error          json.RawMessage     `json:"error"`
}

type wireCandidate struct {
	Content       *wireContent       `json:"content"`
	FinishReason  enum               `json:"finishReason"`
	FinishMessage string             `json:"finishMessage"`
	Index         int                `json:"index"`
	SafetyRatings []wireSafetyRating `json:"safetyRatings"`
}

type wireSafetyRating struct {
	Category    enum `json:"category"`
	Probability enum `json:"probability"`
	Blocked     bool `json:"blocked"`
}

type wirePromptFeedback struct {
	BlockReason        enum               `json:"blockReason"`
	BlockReasonMessage string             `json:"blockReasonMessage"`
	SafetyRatings      []wireSafetyRating `json:"safetyRatings"`
}

type wireUsage struct {
	PromptTokenCount        int64 `json:"promptTokenCount"`
	CachedContentTokenCount int64 `json:"cachedContentTokenCount"`
	CandidatesTokenCount    int64 `json:"candidatesTokenCount"`
	ThoughtsTokenCount      int64 `json:"thoughtsTokenCount"`
	TotalTokenCount         int64 `json:"totalTokenCount"`
}

type wireEmbedRequest struct {
	Requests []wireEmbedContentRequest `json:"requests"`
}

type wireEmbedContentRequest struct {
	Model   string      `json:"model"`
	Content wireContent `json:"content"`
}

type wireEmbedResponse struct {
	Embeddings []struct {
		Values []float32 `json:"values"`
	} `json:"embeddings"`
}

// enum is an enumeration value as the API sends it: its name ("STOP"), or,
// in the integer encoding some clients ask for, its number (1). Either
// way, name gives the name.
type enum string

// UnmarshalJSON accepts a string or an integer.
func (e *enum) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*e = enum(s)
		return nil
	}
	var n int
	if err := json.Unmarshal(b, &n); err != nil {
		return err
	}
	*e = enum(strconv.Itoa(n))
	return nil
}

// name returns the name of e: e itself, or, for a number, its name in
// names (indexed by number), or the number when names has none.
func (e enum) name(names []string) string {
	n, err := strconv.Atoi(string(e))
	if err != nil {
		return string(e)
	}
	if n >= 0 && n < len(names) && names[n] != "" {
		return names[n]
	}
	return string(e)
}

// The API's enumerations by number (google.ai.generativelanguage.v1beta).
var (
	finishReasons = []string{
		0: "FINISH_REASON_UNSPECIFIED", 1: "STOP", 2: "MAX_TOKENS", 3: "SAFETY", 4: "RECITATION",
		5: "OTHER", 6: "LANGUAGE", 7: "BLOCKLIST", 8: "PROHIBITED_CONTENT", 9: "SPII",
		10: "MALFORMED_FUNCTION_CALL", 11: "IMAGE_SAFETY", 12: "UNEXPECTED_TOOL_CALL",
		13: "TOO_MANY_TOOL_CALLS", 14: "IMAGE_PROHIBITED_CONTENT", 15: "IMAGE_OTHER",
		16: "NO_IMAGE", 17: "IMAGE_RECITATION",
	}
	blockReasons = []string{
		0: "BLOCK_REASON_UNSPECIFIED", 1: "SAFETY", 2: "OTHER", 3: "BLOCKLIST",
		4: "PROHIBITED_CONTENT", 5: "IMAGE_SAFETY",
	}
	harmCategories = []string{
		0: "HARM_CATEGORY_UNSPECIFIED", 1: "HARM_CATEGORY_DEROGATORY", 2: "HARM_CATEGORY_TOXICITY",
		3: "HARM_CATEGORY_VIOLENCE", 4: "HARM_CATEGORY_SEXUAL", 5: "HARM_CATEGORY_MEDICAL",
		6: "HARM_CATEGORY_DANGEROUS", 7: "HARM_CATEGORY_HARASSMENT", 8: "HARM_CATEGORY_HATE_SPEECH",
		9: "HARM_CATEGORY_SEXUALLY_EXPLICIT", 10: "HARM_CATEGORY_DANGEROUS_CONTENT",
		11: "HARM_CATEGORY_CIVIC_INTEGRITY",
	}
	harmProbabilities = []string{
		0: "HARM_PROBABILITY_UNSPECIFIED", 1: "NEGLIGIBLE", 2: "LOW", 3: "MEDIUM", 4: "HIGH",
	}
)
