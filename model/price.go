package model

import (
	"regexp"
	"slices"
	"strings"
)

// Price is what a model costs, in US dollars per million tokens.
type Price struct {
	Input float64 `json:"input"`
	// CachedInput is the price of input tokens served from the provider's
	// prompt cache; 0 means the Input price.
	CachedInput float64 `json:"cached_input,omitempty"`
	// CacheWrite is the price of input tokens written to the provider's
	// prompt cache (Anthropic's cache creation); 0 means the Input price.
	CacheWrite float64 `json:"cache_write,omitempty"`
	Output     float64 `json:"output"`
}

// Cost returns what u costs at p, in US dollars. Reasoning tokens are
// output tokens, priced as such.
func (p Price) Cost(u Usage) float64 {
	cached := min(max(u.CachedInputTokens, 0), u.InputTokens)
	written := min(max(u.CacheWriteInputTokens, 0), u.InputTokens-cached)
	cachedPrice := p.CachedInput
	if cachedPrice == 0 {
		cachedPrice = p.Input
	}
	writePrice := p.CacheWrite
	if writePrice == 0 {
		writePrice = p.Input
	}
	plain := u.InputTokens - cached - written
	return (float64(plain)*p.Input + float64(cached)*cachedPrice + float64(written)*writePrice + float64(u.OutputTokens)*p.Output) / 1e6
}

// Prices is a price table, by model name ("gpt-4o-mini"; a provider prefix
// such as "openai:" is ignored when looking a name up).
type Prices map[string]Price

// DefaultPrices returns the list prices of common OpenAI, Anthropic and
// Gemini models as their providers published them in 2025 (Gemini's for
// prompts up to 200,000 tokens). Prices change: give your own table (or add to
// this one) where it matters. A model the table does not have is reported
// as unpriced ([Cost.Unpriced]), never guessed.
func DefaultPrices() Prices {
	return Prices{
		"gpt-5":         {Input: 1.25, CachedInput: 0.125, Output: 10},
		"gpt-5-mini":    {Input: 0.25, CachedInput: 0.025, Output: 2},
		"gpt-5-nano":    {Input: 0.05, CachedInput: 0.005, Output: 0.40},
		"gpt-4.1":       {Input: 2, CachedInput: 0.50, Output: 8},
		"gpt-4.1-mini":  {Input: 0.40, CachedInput: 0.10, Output: 1.60},
		"gpt-4.1-nano":  {Input: 0.10, CachedInput: 0.025, Output: 0.40},
		"gpt-4o":        {Input: 2.50, CachedInput: 1.25, Output: 10},
		"gpt-4o-mini":   {Input: 0.15, CachedInput: 0.075, Output: 0.60},
		"o1":            {Input: 15, CachedInput: 7.50, Output: 60},
		"o3":            {Input: 2, CachedInput: 0.50, Output: 8},
		"o3-mini":       {Input: 1.10, CachedInput: 0.55, Output: 4.40},
		"o4-mini":       {Input: 1.10, CachedInput: 0.275, Output: 4.40},
		"gpt-4-turbo":   {Input: 10, Output: 30},
		"gpt-4":         {Input: 30, Output: 60},
		"gpt-3.5-turbo": {Input: 0.50, Output: 1.50},

		"claude-opus-4-1":   {Input: 15, CachedInput: 1.50, CacheWrite: 18.75, Output: 75},
		"claude-opus-4":     {Input: 15, CachedInput: 1.50, CacheWrite: 18.75, Output: 75},
		"claude-sonnet-4-5": {Input: 3, CachedInput: 0.30, CacheWrite: 3.75, Output: 15},
		"claude-sonnet-4":   {Input: 3, CachedInput: 0.30, CacheWrite: 3.75, Output: 15},
		"claude-3-7-sonnet": {Input: 3, CachedInput: 0.30, CacheWrite: 3.75, Output: 15},
		"claude-haiku-4-5":  {Input: 1, CachedInput: 0.10, CacheWrite: 1.25, Output: 5},
		"claude-3-5-haiku":  {Input: 0.80, CachedInput: 0.08, CacheWrite: 1, Output: 4},

		"gemini-2.5-pro":        {Input: 1.25, CachedInput: 0.31, Output: 10},
		"gemini-2.5-flash":      {Input: 0.30, CachedInput: 0.075, Output: 2.50},
		"gemini-2.5-flash-lite": {Input: 0.10, CachedInput: 0.025, Output: 0.40},
		"gemini-2.0-flash":      {Input: 0.10, CachedInput: 0.025, Output: 0.40},
		"gemini-2.0-flash-lite": {Input: 0.075, Output: 0.30},
	}
}

// snapshot matches the date (or number) a model snapshot's name ends with:
// "gpt-4o-2024-08-06", "gpt-4-0613".
var snapshot = regexp.MustCompile(`^-(\d{4}-\d{2}-\d{2}|\d{8}|\d{4})$`)

// Lookup returns the price of the model name: the table's entry for it,
// or, for a snapshot ("gpt-4o-mini-2024-07-18"), for the model it is a
// snapshot of.
func (p Prices) Lookup(name string) (Price, bool) {
	if i := strings.LastIndex(name, ":"); i >= 0 {
		name = name[i+1:]
	}
	if pr, ok := p[name]; ok {
		return pr, true
	}
	if loc := snapshotSuffix(name); loc > 0 {
		pr, ok := p[name[:loc]]
		return pr, ok
	}
	return Price{}, false
}

func snapshotSuffix(name string) int {
	for i := len(name) - 1; i > 0; i-- {
		if name[i] == '-' && snapshot.MatchString(name[i:]) {
			return i
		}
	}
	return -1
}

// Cost is what some model calls cost: the sum of those whose model has a
// price, and the models that have none, whose calls it leaves out.
type Cost struct {
	USD float64 `json:"usd"`
	// Unpriced names the models whose calls are not counted in USD,
	// sorted; empty when every call was priced.
	Unpriced []string `json:"unpriced,omitempty"`
}

// Add returns the sum of c and d.
func (c Cost) Add(d Cost) Cost {
	out := Cost{USD: c.USD + d.USD}
	if len(c.Unpriced)+len(d.Unpriced) > 0 {
		out.Unpriced = slices.Compact(slices.Sorted(slices.Values(append(slices.Clone(c.Unpriced), d.Unpriced...))))
	}
	return out
}

// CostOf returns what u, used by the model name, costs at the table's
// prices.
func (p Prices) CostOf(name string, u Usage) Cost {
	pr, ok := p.Lookup(name)
	if !ok {
		if u.Requests == 0 && u.InputTokens == 0 && u.OutputTokens == 0 {
			return Cost{}
		}
		if i := strings.LastIndex(name, ":"); i >= 0 {
			name = name[i+1:]
		}
		return Cost{Unpriced: []string{name}}
	}
	return Cost{USD: pr.Cost(u)}
}
