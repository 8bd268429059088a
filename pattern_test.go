package calf

import (
	"errors"
	"testing"
)

func TestMatchChannel(t *testing.T) {
	tests := []struct {
		pattern, channel string
		want             bool
	}{
		{"a.b.c", "a.b.c", true},
		{"a.b.c", "a.b", false},
		{"a.b", "a.b.c", false},
		{"a.*.c", "a.b.c", true},
		{"a.*.c", "a.b.d", false},
		{"a.*", "a.b.c", false},
		{"a.>", "a.b.c", true},
		{"a.>", "a.b", true},
		{"a.>", "a", false},
		{">", "a", true},
		{"*", "a", true},
		{"*", "a.b", false},
		{"calf.agent.*.output", "calf.agent.x.output", true},
		{"calf.agent.x.>", "calf.agent.x.tool_call.add", true},
		{"calf.agent.x.>", "calf.agent.xy.input", false},
		{"ab", "a", false},
		{"a", "ab", false},
	}
	for _, tt := range tests {
		if got := MatchChannel(tt.pattern, tt.channel); got != tt.want {
			t.Errorf("MatchChannel(%q, %q) = %v, want %v", tt.pattern, tt.channel, got, tt.want)
		}
	}
}

func TestValidate(t *testing.T) {
	for _, c := range []string{"a", "a.b", "calf.agent.x-y_z.input"} {
		if err := ValidateChannel(c); err != nil {
			t.Errorf("ValidateChannel(%q) = %v", c, err)
		}
	}
	for _, c := range []string{"", "a..b", ".a", "a.", "a.*", "a.>", "a b", "a.b*", "a\fb", "a\x00", "a\x7f"} {
		if err := ValidateChannel(c); !errors.Is(err, ErrInvalidChannel) {
			t.Errorf("ValidateChannel(%q) = %v, want ErrInvalidChannel", c, err)
		}
	}
	for _, p := range []string{"a", "a.*", "*.b", "a.>", ">", "*.*.>"} {
		if err := ValidatePattern(p); err != nil {
			t.Errorf("ValidatePattern(%q) = %v", p, err)
		}
	}
	for _, p := range []string{"", "a.>.b", "a..b", "a*", "a.b>"} {
		if err := ValidatePattern(p); !errors.Is(err, ErrInvalidChannel) {
			t.Errorf("ValidatePattern(%q) = %v, want ErrInvalidChannel", p, err)
		}
	}
}

func FuzzMatchChannel(f *testing.F) {
	f.Add("a.*.c", "a.b.c")
	f.Add("a.>", "a.b")
	f.Fuzz(func(t *testing.T, pattern, channel string) {
		got := MatchChannel(pattern, channel)
		if pattern == channel && ValidateChannel(channel) == nil && !got {
			t.Errorf("a valid channel %q does not match itself", channel)
		}
	})
}

func TestPermanent(t *testing.T) {
	base := errors.New("boom")
	err := Permanent(base)
	if !IsPermanent(err) || !errors.Is(err, base) {
		t.Fatalf("Permanent(%v): IsPermanent=%v Is=%v", base, IsPermanent(err), errors.Is(err, base))
	}
	if IsPermanent(base) || Permanent(nil) != nil {
		t.Fatal("plain error is permanent, or Permanent(nil) is not nil")
	}
}
