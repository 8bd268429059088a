package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/store/memory"
	"github.com/calf-go/calf/store/sqlite"
)

// defaultStore is the --store default: SQLite at sqlite.DefaultPath.
const defaultStore = "sqlite:"

// storeSchemes maps the scheme of a --store value to the function that
// opens such a store at the rest of the value. A scheme added here is
// accepted by --store.
var storeSchemes = map[string]func(location string) (store.Store, error){
	// sqlite:PATH, sqlite:///ABS/PATH; an empty PATH means sqlite.DefaultPath.
	"sqlite": func(location string) (store.Store, error) {
		path := strings.TrimPrefix(location, "//")
		if path == "" {
			var err error
			if path, err = sqlite.DefaultPath(); err != nil {
				return nil, err
			}
		}
		return sqlite.Open(path, nil)
	},
	// memory: keeps state in the process; it is gone when calf exits.
	"memory": func(location string) (store.Store, error) {
		if rest := strings.TrimPrefix(location, "//"); rest != "" {
			return nil, usageError(fmt.Errorf("memory: takes nothing after the scheme, got %q", location))
		}
		return memory.New(), nil
	},
}

// storeSchemeNames returns the known store schemes, sorted.
func storeSchemeNames() []string {
	names := make([]string, 0, len(storeSchemes))
	for s := range storeSchemes {
		names = append(names, s)
	}
	slices.Sort(names)
	return names
}

// storeOpener parses a --store value, SCHEME:LOCATION, and returns the
// function that opens the store. An unknown or missing scheme is a usage
// error that lists the known ones.
func storeOpener(spec string) (func() (store.Store, error), error) {
	known := strings.Join(storeSchemeNames(), ", ")
	scheme, location, ok := strings.Cut(spec, ":")
	if !ok {
		return nil, usageError(fmt.Errorf("--store %q: no scheme: want SCHEME:LOCATION, as in sqlite:PATH or memory:; known schemes: %s", spec, known))
	}
	open, ok := storeSchemes[scheme]
	if !ok {
		return nil, usageError(fmt.Errorf("--store %q: unknown store scheme %q: known schemes: %s", spec, scheme, known))
	}
	return func() (store.Store, error) {
		s, err := open(location)
		if err != nil {
			return nil, fmt.Errorf("--store %s: %w", spec, err)
		}
		return s, nil
	}, nil
}
