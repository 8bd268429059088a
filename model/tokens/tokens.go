package tokens

import (
	"strings"
	"sync"

	"github.com/tiktoken-go/tokenizer/codec"

	"github.com/calf-go/calf/model"
)

// Encoding names a tokenizer.
type Encoding string

// The encodings this package embeds.
const (
	// O200kBase is the encoding of gpt-4o, gpt-4.1, gpt-5 and the o-series.
	O200kBase Encoding = "o200k_base"
	// Cl100kBase is the encoding of gpt-4, gpt-3.5-turbo and the
	// text-embedding-3 models.
	Cl100kBase Encoding = "cl100k_base"
)

// Framing costs, in tokens, as OpenAI's chat format counts them: each
// message, each tool call, and an image (one 512-pixel tile at high detail
// plus the base cost; larger images cost more).
const (
	perMessage  = 3
	perToolCall = 3
	perImage    = 255
)

var (
	o200k  = sync.OnceValue(codec.NewO200kBase)
	cl100k = sync.OnceValue(codec.NewCl100kBase)
)

// EncodingFor returns the encoding of the named model (a provider prefix
// such as "openai:" is ignored), and whether it is known: a model it does
// not know gets O200kBase, an approximation.
func EncodingFor(name string) (Encoding, bool) {
	if _, after, ok := strings.Cut(name, ":"); ok && !strings.Contains(after, ":") {
		name = after
	}
	name = strings.ToLower(name)
	switch {
	case strings.HasPrefix(name, "gpt-4o"), strings.HasPrefix(name, "gpt-4.1"), strings.HasPrefix(name, "gpt-4.5"),
		strings.HasPrefix(name, "gpt-5"), strings.HasPrefix(name, "chatgpt-4o"), strings.HasPrefix(name, "gpt-oss"),
		strings.HasPrefix(name, "o1"), strings.HasPrefix(name, "o3"), strings.HasPrefix(name, "o4"):
		return O200kBase, true
	case strings.HasPrefix(name, "gpt-4"), strings.HasPrefix(name, "gpt-3.5"), strings.HasPrefix(name, "gpt-35"),
		strings.HasPrefix(name, "text-embedding-3"), strings.HasPrefix(name, "text-embedding-ada-002"):
		return Cl100kBase, true
	}
	return O200kBase, false
}

// ForModel returns a function that counts the tokens of a message for the
// named model, and whether its tokenizer is the model's own (see
// [EncodingFor]). The function is safe for concurrent use.
func ForModel(name string) (count func(model.Message) int, exact bool) {
	enc, exact := EncodingFor(name)
	return Counter(enc), exact
}

// Counter returns a function that counts the tokens of a message with
// the encoding enc (O200kBase for an unknown one): the text of its parts,
// its tool calls' names and arguments, and the framing of OpenAI's chat
// format; an image counts as one tile.
func Counter(enc Encoding) func(model.Message) int {
	get := o200k
	if enc == Cl100kBase {
		get = cl100k
	}
	return func(m model.Message) int {
		c := get()
		n := perMessage + Count(c, string(m.Role))
		for _, p := range m.Parts {
			if p.Type == model.PartImage {
				n += perImage
				continue
			}
			n += Count(c, p.Text)
		}
		for _, tc := range m.ToolCalls {
			n += perToolCall + Count(c, tc.Name) + Count(c, tc.Arguments)
		}
		if m.ToolCallID != "" {
			n += Count(c, m.ToolCallID)
		}
		return n
	}
}

// Count returns the tokens of s with c; text the tokenizer cannot take
// (invalid UTF-8) counts a token for every three bytes.
func Count(c *codec.Codec, s string) int {
	if s == "" {
		return 0
	}
	n, err := c.Count(s)
	if err != nil {
		return (len(s) + 2) / 3
	}
	return n
}
