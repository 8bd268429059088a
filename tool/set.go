package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/calf-go/calf/model"
)

// ErrDuplicateTool is returned when a [Set] already has a tool of the name.
var ErrDuplicateTool = errors.New("tool: duplicate tool name")

// Set is a collection of tools with distinct names, kept in the order they
// were added. The zero value is an empty set ready to use, and a nil *Set
// is an empty set that cannot be added to. A Set is safe for concurrent use.
type Set struct {
	mu     sync.RWMutex
	tools  []Tool
	byName map[string]Tool
}

// NewSet returns a set of tools; see [Set.Add].
func NewSet(tools ...Tool) (*Set, error) {
	s := new(Set)
	if err := s.Add(tools...); err != nil {
		return nil, err
	}
	return s, nil
}

// Add adds tools to the set. It adds none of them and returns an error if
// one has an invalid name (see [CheckName]) or a name that is already in
// the set or given twice (an error matching [ErrDuplicateTool]).
func (s *Set) Add(tools ...Tool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := make(map[string]bool, len(tools))
	for _, t := range tools {
		if t == nil {
			return errors.New("tool: nil tool")
		}
		name := t.Definition().Name
		if err := CheckName(name); err != nil {
			return err
		}
		if _, ok := s.byName[name]; ok || names[name] {
			return fmt.Errorf("%w: %q", ErrDuplicateTool, name)
		}
		names[name] = true
	}
	if s.byName == nil {
		s.byName = make(map[string]Tool, len(tools))
	}
	for _, t := range tools {
		s.byName[t.Definition().Name] = t
		s.tools = append(s.tools, t)
	}
	return nil
}

// Get returns the tool named name.
func (s *Set) Get(name string) (Tool, bool) {
	if s == nil {
		return nil, false
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	t, ok := s.byName[name]
	return t, ok
}

// Len returns the number of tools in the set.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.tools)
}

// Tools returns the tools in the order they were added.
func (s *Set) Tools() []Tool {
	if s == nil {
		return nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return append([]Tool(nil), s.tools...)
}

// Names returns the tools' names in the order they were added.
func (s *Set) Names() []string {
	if s == nil {
		return nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	names := make([]string, len(s.tools))
	for i, t := range s.tools {
		names[i] = t.Definition().Name
	}
	return names
}

// Definitions returns the tools' definitions in the order they were added,
// as a [model.Request] takes them.
func (s *Set) Definitions() []model.ToolDefinition {
	if s == nil {
		return nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	defs := make([]model.ToolDefinition, len(s.tools))
	for i, t := range s.tools {
		defs[i] = t.Definition()
	}
	return defs
}

// Call calls the tool named name with args. It returns an error matching
// [ErrUnknownTool] when the set has no such tool.
func (s *Set) Call(ctx context.Context, name string, args json.RawMessage) (*Result, error) {
	t, ok := s.Get(name)
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownTool, name)
	}
	return t.Call(ctx, args)
}
