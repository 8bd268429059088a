package tokens_test

import (
	"sync"
	"testing"

	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/tokens"
)

func TestEncodingFor(t *testing.T) {
	for name, want := range map[string]struct {
		enc   tokens.Encoding
		exact bool
	}{
		"gpt-4o-mini":       {tokens.O200kBase, true},
		"openai:gpt-4.1":    {tokens.O200kBase, true},
		"gpt-5-nano":        {tokens.O200kBase, true},
		"o3-mini":           {tokens.O200kBase, true},
		"GPT-4-turbo":       {tokens.Cl100kBase, true},
		"gpt-3.5-turbo":     {tokens.Cl100kBase, true},
		"llama3.2":          {tokens.O200kBase, false},
		"qwen2.5:7b":        {tokens.O200kBase, false},
		"":                  {tokens.O200kBase, false},
		"openai:gpt-4o:odd": {tokens.O200kBase, false},
	} {
		enc, exact := tokens.EncodingFor(name)
		if enc != want.enc || exact != want.exact {
			t.Errorf("EncodingFor(%q) = %s, %v; want %s, %v", name, enc, exact, want.enc, want.exact)
		}
	}
}

// Counts of the reference tokenizers: "hello world" is 2 tokens in both
// encodings; the framing adds 3 a message and the role's tokens.
func TestCounter(t *testing.T) {
	for _, enc := range []tokens.Encoding{tokens.O200kBase, tokens.Cl100kBase} {
		count := tokens.Counter(enc)
		if got := count(model.UserMessage("hello world")); got != 3+1+2 {
			t.Errorf("%s: user message %q = %d tokens, want 6", enc, "hello world", got)
		}
		call := model.Message{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "c1", Name: "add", Arguments: `{"a":2,"b":3}`}}}
		if got := count(call); got <= 3+1+3 {
			t.Errorf("%s: a tool call counts %d tokens, no more than its framing", enc, got)
		}
		image := model.Message{Role: model.RoleUser, Parts: []model.Part{model.ImageURLPart("https://example.org/a.png")}}
		if got := count(image); got != 3+1+255 {
			t.Errorf("%s: an image = %d tokens", enc, got)
		}
		if got := count(model.UserMessage("\xff\xfe\xfd")); got < 4 {
			t.Errorf("%s: invalid UTF-8 = %d tokens", enc, got)
		}
	}
	// The two encodings differ: o200k is denser on non-English text.
	text := model.UserMessage("Привет, как дела? Сегодня хорошая погода, и мы идём гулять в парк.")
	o, c := tokens.Counter(tokens.O200kBase)(text), tokens.Counter(tokens.Cl100kBase)(text)
	if o >= c {
		t.Errorf("o200k %d tokens, cl100k %d: want fewer with o200k", o, c)
	}
}

func TestCounterConcurrent(t *testing.T) {
	count, _ := tokens.ForModel("gpt-4o")
	want := count(model.UserMessage("the quick brown fox jumps over the lazy dog"))
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				if got := count(model.UserMessage("the quick brown fox jumps over the lazy dog")); got != want {
					t.Errorf("concurrent count %d, want %d", got, want)
					return
				}
			}
		})
	}
	wg.Wait()
}
