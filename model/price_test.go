package model_test

import (
	"math"
	"slices"
	"testing"

	"github.com/calf-go/calf/model"
)

func TestPrices(t *testing.T) {
	p := model.DefaultPrices()
	for name, want := range map[string]float64{
		"gpt-4o-mini":            0.15,
		"openai:gpt-4o-mini":     0.15,
		"gpt-4o-mini-2024-07-18": 0.15,
		"gpt-4o-2024-08-06":      2.50,
		"gpt-4-0613":             30,
		"gpt-4.1-nano":           0.10,
	} {
		if pr, ok := p.Lookup(name); !ok || pr.Input != want {
			t.Errorf("Lookup(%q) = %+v, %v; want input %v", name, pr, ok, want)
		}
	}
	for _, name := range []string{"gpt-4o-audio-preview", "llama3.2", "gpt-4o-mini-search", ""} {
		if pr, ok := p.Lookup(name); ok {
			t.Errorf("Lookup(%q) = %+v: guessed", name, pr)
		}
	}
}

func TestCost(t *testing.T) {
	p := model.Prices{"m": {Input: 2, CachedInput: 0.5, Output: 8}, "plain": {Input: 1, Output: 2}}
	u := model.Usage{Requests: 1, InputTokens: 1_000_000, CachedInputTokens: 400_000, OutputTokens: 250_000}
	// 600k at 2, 400k at 0.5, 250k at 8: 1.2 + 0.2 + 2.
	if c := p.CostOf("m", u); math.Abs(c.USD-3.4) > 1e-9 || c.Unpriced != nil {
		t.Errorf("cost %+v, want 3.4", c)
	}
	// No cached price: cached input at the input price.
	if c := p.CostOf("plain", u); math.Abs(c.USD-1.5) > 1e-9 {
		t.Errorf("cost %+v, want 1.5", c)
	}
	c := p.CostOf("mystery", u).Add(p.CostOf("m", u)).Add(p.CostOf("other", u)).Add(p.CostOf("mystery", u))
	if math.Abs(c.USD-3.4) > 1e-9 || !slices.Equal(c.Unpriced, []string{"mystery", "other"}) {
		t.Errorf("sum %+v", c)
	}
	if c := p.CostOf("mystery", model.Usage{}); c.Unpriced != nil {
		t.Errorf("no use of an unpriced model is reported: %+v", c)
	}
}

func TestCacheWriteAndNewModels(t *testing.T) {
	prices := model.DefaultPrices()
	p, ok := prices.Lookup("anthropic:claude-sonnet-4-5-20250929")
	if !ok {
		t.Fatal("claude-sonnet-4-5-20250929 has no price")
	}
	// 1,000,000 input tokens: 200,000 read from the cache, 100,000 written
	// to it; 100,000 output tokens, 40,000 of them reasoning.
	u := model.Usage{InputTokens: 1_000_000, CachedInputTokens: 200_000, CacheWriteInputTokens: 100_000, OutputTokens: 100_000, ReasoningTokens: 40_000}
	want := (700_000*3 + 200_000*0.30 + 100_000*3.75 + 100_000*15) / 1e6
	if got := p.Cost(u); math.Abs(got-want) > 1e-9 {
		t.Errorf("cost = %v, want %v", got, want)
	}
	for _, name := range []string{"gemini:gemini-2.5-flash", "claude-3-5-haiku-20241022", "claude-opus-4-1-20250805", "gemini-2.0-flash"} {
		if _, ok := prices.Lookup(name); !ok {
			t.Errorf("%s has no price", name)
		}
	}
}
