package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/adapters"
	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/store/sqlite"
)

// defaultStore is the --store default: SQLite at sqlite.DefaultPath.
const defaultStore = "sqlite:"

// defaultBroker is the --broker default of calf run: in this process.
const defaultBroker = "memory://"

// storeHelp and brokerHelp describe the URLs --store and --broker take.
const (
	storeHelp  = "where state lives: sqlite:PATH (empty PATH: the default file), memory:, postgres://..., redis://..."
	brokerHelp = "the broker: memory:// (in this process), nats://HOST:PORT[,HOST:PORT], nats+embedded://DIR, kafka://HOST:PORT[,HOST:PORT]"
)

// checkStore validates a --store value without opening it: an unknown
// scheme is a usage error.
func checkStore(spec string) error {
	if scheme, _, ok := strings.Cut(spec, ":"); !ok || scheme == "" {
		// A path, most likely: say how to name a SQLite file.
		return usageError(fmt.Errorf("--store %s: no scheme: a SQLite file is sqlite:%s (the other stores: memory:, postgres://USER@HOST:PORT/DB, redis://HOST:PORT/DB)", spec, spec))
	}
	if err := adapters.CheckStoreURL(spec); err != nil {
		return usageError(fmt.Errorf("--store: %w", err))
	}
	return nil
}

// checkBroker validates a --broker value without opening it.
func checkBroker(spec string) error {
	if err := adapters.CheckBrokerURL(spec); err != nil {
		return usageError(fmt.Errorf("--broker: %w", err))
	}
	return nil
}

// checkToolDirs refuses tool directories (--read, --edit, --bash) that
// hold the SQLite file of the --store value spec: the agent's tools would
// read, and its commands change, every run and session of the store,
// other users' included.
func checkToolDirs(spec string, f *agentFlags) error {
	rest, ok := strings.CutPrefix(spec, "sqlite:")
	if !ok {
		return nil
	}
	path, _, _ := strings.Cut(strings.TrimPrefix(rest, "//"), "?")
	if path == "" {
		var err error
		if path, err = sqlite.DefaultPath(); err != nil {
			return nil // openStore says why
		}
	}
	db := realPath(path)
	for _, d := range []struct{ flag, dir string }{{"read", f.read}, {"edit", f.edit}, {"bash", f.bash}, {"root", f.root}} {
		if d.dir == "" {
			continue
		}
		if rel, err := filepath.Rel(realPath(d.dir), db); err == nil && filepath.IsLocal(rel) {
			return usageError(fmt.Errorf("--%s %s holds the store %s: the agent's tools would reach every session in it; "+
				"give a directory that does not hold it, or put the store elsewhere with --store sqlite:PATH", d.flag, d.dir, path))
		}
	}
	return nil
}

// realPath returns p absolute, with the symbolic links of its longest
// existing part resolved.
func realPath(p string) string {
	abs, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	for dir, rest := abs, ""; ; {
		if real, err := filepath.EvalSymlinks(dir); err == nil {
			return filepath.Join(real, rest)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return abs
		}
		dir, rest = parent, filepath.Join(filepath.Base(dir), rest)
	}
}

// isMemory reports whether a --store or --broker value is memory: or
// memory://, which only this process reaches.
func isMemory(spec string) bool {
	return strings.HasPrefix(strings.ToLower(spec), "memory:")
}

// openStore opens the store of a --store value. A malformed value is a
// usage error; a store that cannot be reached is a failure.
func openStore(ctx context.Context, spec string, log *slog.Logger) (store.Store, error) {
	if err := checkStore(spec); err != nil {
		return nil, err
	}
	s, err := adapters.OpenStore(ctx, spec, &adapters.Options{Logger: log})
	if errors.Is(err, adapters.ErrBadURL) {
		return nil, usageError(fmt.Errorf("--store: %w", err))
	}
	if err != nil {
		return nil, failure(fmt.Errorf("--store: %w", err))
	}
	return s, nil
}

// openBroker opens the broker of a --broker value.
func openBroker(ctx context.Context, spec string, log *slog.Logger) (calf.Broker, error) {
	if err := checkBroker(spec); err != nil {
		return nil, err
	}
	b, err := adapters.OpenBroker(ctx, spec, &adapters.Options{Logger: log})
	if errors.Is(err, adapters.ErrBadURL) {
		return nil, usageError(fmt.Errorf("--broker: %w", err))
	}
	if err != nil {
		return nil, failure(fmt.Errorf("--broker: %w", err))
	}
	return b, nil
}
