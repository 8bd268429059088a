package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/adapters"
	"github.com/calf-go/calf/store"
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
