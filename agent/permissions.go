package agent

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/calf-go/calf/tool"
)

// PermissionMode says which tool calls run without a person's approval.
type PermissionMode string

// The permission modes, from the strictest.
const (
	// PermissionAsk asks for every call (but those of Allowed tools).
	PermissionAsk PermissionMode = "ask"
	// PermissionAcceptReads runs read tools, and asks for the others.
	PermissionAcceptReads PermissionMode = "accept_reads"
	// PermissionAcceptEdits runs read and edit tools, and asks for
	// execute and network tools.
	PermissionAcceptEdits PermissionMode = "accept_edits"
	// PermissionBypass runs every call (but those of Disallowed tools).
	PermissionBypass PermissionMode = "bypass"
)

// Permissions decide which of an agent's tool calls run, which are
// refused, and which wait for a person's approval (see [approval.Approval]). They
// apply after the pre_tool_use hooks, to the arguments those leave.
type Permissions struct {
	// Mode decides by the tool's kind ([tool.KindOf]). Default
	// [PermissionAsk].
	Mode PermissionMode `json:"mode,omitempty"`
	// Allowed tools run without asking, whatever the mode: names, or
	// path.Match patterns ("web_*"), several separated by "|".
	Allowed []string `json:"allowed,omitempty"`
	// Disallowed tools never run: the model is told the call was refused.
	// They win over Allowed and over every mode.
	Disallowed []string `json:"disallowed,omitempty"`
	// ApprovalTimeout, when positive, denies an approval request that no
	// one answered within it: a durable timer started with the request
	// denies it when it passes, in whichever process serves timers, and
	// the model is told no one answered in time. Default: requests wait
	// until answered.
	ApprovalTimeout time.Duration `json:"approval_timeout,omitempty"`
}

// permissionDecision is what Permissions.decide says of a call.
type permissionDecision string

// The permission decisions.
const (
	decideAllow permissionDecision = "allow"
	decideDeny  permissionDecision = "deny"
	decideAsk   permissionDecision = "ask"
)

// Decide says whether a call of the tool name, of kind, runs, is refused,
// or asks for approval, and why.
func (p *Permissions) decide(name string, kind tool.Kind) (permissionDecision, string) {
	if matchAny(name, p.Disallowed...) {
		return decideDeny, fmt.Sprintf("the tool %s is not allowed", name)
	}
	if matchAny(name, p.Allowed...) {
		return decideAllow, ""
	}
	mode := p.Mode
	if mode == "" {
		mode = PermissionAsk
	}
	switch {
	case mode == PermissionBypass,
		mode == PermissionAcceptEdits && (kind == tool.KindRead || kind == tool.KindEdit),
		mode == PermissionAcceptReads && kind == tool.KindRead:
		return decideAllow, ""
	}
	return decideAsk, fmt.Sprintf("permission mode %s asks before %s tools", mode, kind)
}

func (p *Permissions) validate() error {
	switch p.Mode {
	case "", PermissionAsk, PermissionAcceptReads, PermissionAcceptEdits, PermissionBypass:
	default:
		return fmt.Errorf("unknown permission mode %q", p.Mode)
	}
	for _, pat := range append(slices.Clone(p.Allowed), p.Disallowed...) {
		if err := checkPatterns(pat); err != nil {
			return fmt.Errorf("tool pattern %w", err)
		}
	}
	return nil
}

// matchAny reports whether name matches one of patterns: path.Match
// patterns, several in one string separated by "|".
func matchAny(name string, patterns ...string) bool {
	for _, pat := range patterns {
		for _, q := range strings.Split(pat, "|") {
			if ok, _ := path.Match(q, name); ok {
				return true
			}
		}
	}
	return false
}

// checkPatterns reports a malformed pattern of patterns (see matchAny).
func checkPatterns(patterns string) error {
	for _, q := range strings.Split(patterns, "|") {
		if _, err := path.Match(q, ""); err != nil {
			return fmt.Errorf("%q: %v", patterns, err)
		}
	}
	return nil
}
