package redis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/store/adapter"
)

var _ store.Store = (*Store)(nil)

// DefaultKeyPrefix is the default of [Options.KeyPrefix].
const DefaultKeyPrefix = "calf:"

// Options configure a [Store]. The zero value, like a nil *Options, means
// every default.
type Options struct {
	// KeyPrefix starts the name of every key the Store reads or writes, so
	// that several deployments, or a Store and other data, can share one
	// Redis database. Default [DefaultKeyPrefix]. With Redis Cluster, give
	// a prefix that holds a hash tag, such as "{calf}:", so that every key
	// is in one slot.
	KeyPrefix string
	// Logger receives the connection Open makes, at level Debug, and, at
	// level Info, writes found to have been applied by an earlier attempt
	// whose reply was lost. Default: nothing is logged. The go-redis
	// client reports some connection failures through its own package-wide
	// logger instead, which programs set with go-redis's SetLogger.
	Logger *slog.Logger
	// Now returns the time a write records as the record's UpdatedAt.
	// Default time.Now.
	Now func() time.Time
}

// Store is a [store.Store] in a Redis database. All methods are safe for
// concurrent use.
type Store struct {
	client goredis.UniversalClient
	owned  bool // Close closes client
	prefix string
	now    func() time.Time
	log    *slog.Logger

	guard     adapter.Guard
	closeOnce sync.Once
	closeErr  error
}

// Open connects to the Redis server named by url, of the form
// redis://[user:password@]host:port/db (rediss:// for TLS; the query may
// set the client options that go-redis's ParseURL knows, such as
// client_name or read_timeout), and checks the connection with a PING
// bounded by ctx. A nil opts means defaults. Close the Store when done: it
// closes the connections.
func Open(ctx context.Context, url string, opts *Options) (*Store, error) {
	o, err := goredis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("store/redis: open: %w", err)
	}
	client := goredis.NewClient(o)
	s := New(client, opts)
	s.owned = true
	err = s.do(ctx, func(ctx context.Context) error {
		return client.Ping(ctx).Err()
	})
	if err != nil {
		client.Close()
		if ctxErr := ctx.Err(); ctxErr != nil {
			err = ctxErr
		}
		return nil, fmt.Errorf("store/redis: open %s: %w", o.Addr, err)
	}
	s.log.Debug("store/redis: connected", "addr", o.Addr, "db", o.DB, "prefix", s.prefix)
	return s, nil
}

// New returns a Store that uses client, a connection the caller already
// has. It makes no request. A nil opts means defaults. Closing the Store
// leaves client open: the caller closes it.
func New(client goredis.UniversalClient, opts *Options) *Store {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.KeyPrefix == "" {
		o.KeyPrefix = DefaultKeyPrefix
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Store{guard: adapter.Guard{Name: "store/redis", Unavailable: unavailable}, client: client, prefix: o.KeyPrefix, now: o.Now, log: o.Logger}
}

// Keys: every record is a hash at recordKey, and every kind has a sorted
// set at indexKey whose members are the ids of its records, all with score
// 0 so that they sort by their bytes. The kind in a record key is preceded
// by its length, so that a ':' in a kind or an id cannot make two records
// share a key.

func (s *Store) recordKeyBase(kind string) string {
	return s.prefix + "r:" + strconv.Itoa(len(kind)) + ":" + kind + ":"
}

func (s *Store) recordKey(kind, id string) string { return s.recordKeyBase(kind) + id }

func (s *Store) indexKey(kind string) string { return s.prefix + "k:" + kind }

// putScript writes a record if its version is the expected one.
// KEYS: record, index. ARGV: id, expected version ("0": must not exist),
// new version, data, updated_at, write token.
// It returns 1 when it wrote, 2 when an earlier run with the same token
// already did (a retry after a lost reply), and 0 on a conflict.
var putScript = goredis.NewScript(`
local v = redis.call('HGET', KEYS[1], 'v')
if ARGV[2] == '0' then
  if v then
    if v == ARGV[3] and redis.call('HGET', KEYS[1], 'w') == ARGV[6] then return 2 end
    return 0
  end
elseif v ~= ARGV[2] then
  if v == ARGV[3] and redis.call('HGET', KEYS[1], 'w') == ARGV[6] then return 2 end
  return 0
end
redis.call('HSET', KEYS[1], 'v', ARGV[3], 'd', ARGV[4], 't', ARGV[5], 'w', ARGV[6])
redis.call('ZADD', KEYS[2], 0, ARGV[1])
return 1
`)

// deleteScript removes a record if its version is the expected one.
// KEYS: record, index. ARGV: id, expected version ("0": any).
// It returns 1 when the record is gone and 0 on a conflict.
var deleteScript = goredis.NewScript(`
if ARGV[2] ~= '0' then
  local v = redis.call('HGET', KEYS[1], 'v')
  if v and v ~= ARGV[2] then return 0 end
end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
return 1
`)

// listScript reads one page of a kind, ids and records from one snapshot.
// KEYS: index. ARGV: record key base, ZRANGEBYLEX min, max, limit ("0":
// none). It returns id, version, data, updated_at for each record.
var listScript = goredis.NewScript(`
local ids
if ARGV[4] == '0' then
  ids = redis.call('ZRANGEBYLEX', KEYS[1], ARGV[2], ARGV[3])
else
  ids = redis.call('ZRANGEBYLEX', KEYS[1], ARGV[2], ARGV[3], 'LIMIT', 0, ARGV[4])
end
local out = {}
for _, id in ipairs(ids) do
  local r = redis.call('HMGET', ARGV[1] .. id, 'v', 'd', 't')
  if r[1] then
    out[#out + 1] = id
    out[#out + 1] = r[1]
    out[#out + 1] = r[2]
    out[#out + 1] = r[3]
  end
end
return out
`)

// Get returns the record, or [store.ErrNotFound].
func (s *Store) Get(ctx context.Context, kind, id string) (store.Record, error) {
	if err := s.guard.Check(ctx, kind, id); err != nil {
		return store.Record{}, err
	}
	key := s.recordKey(kind, id)
	var vals []any
	err := s.do(ctx, func(ctx context.Context) error {
		var err error
		vals, err = s.client.HMGet(ctx, key, "v", "d", "t").Result()
		return err
	})
	if err != nil {
		return store.Record{}, s.guard.Fail(ctx, "get", err)
	}
	if len(vals) != 3 || vals[0] == nil {
		return store.Record{}, fmt.Errorf("%w: %s/%s", store.ErrNotFound, kind, id)
	}
	rec, err := decode(kind, id, vals[0], vals[1], vals[2])
	if err != nil {
		return store.Record{}, fmt.Errorf("store/redis: get %s/%s: %w", kind, id, err)
	}
	return rec, nil
}

// Put writes data if the record's stored version is version (0: the record
// must not exist) and returns the new version, or [store.ErrConflict].
func (s *Store) Put(ctx context.Context, kind, id string, data []byte, version int64) (int64, error) {
	if err := s.guard.Check(ctx, kind, id); err != nil {
		return 0, err
	}
	if version < 0 {
		return 0, adapter.ConflictError(kind, id, version)
	}
	keys := []string{s.recordKey(kind, id), s.indexKey(kind)}
	// The token tells a retry of this write, after a reply lost with a
	// connection, from a write by someone else.
	token := strconv.FormatUint(rand.Uint64(), 36)
	// A string copy: the request may still be on its way after a cancelled
	// Put has returned and the caller reuses data.
	args := []any{id, strconv.FormatInt(version, 10), strconv.FormatInt(version+1, 10),
		string(data), strconv.FormatInt(s.now().UnixNano(), 10), token}
	var res int64
	err := s.do(ctx, func(ctx context.Context) error {
		var err error
		res, err = putScript.Run(ctx, s.client, keys, args...).Int64()
		return err
	})
	if err != nil {
		return 0, s.guard.Fail(ctx, "put", err)
	}
	switch res {
	case 0:
		return 0, adapter.ConflictError(kind, id, version)
	case 2:
		s.log.Info("store/redis: write was applied by an earlier attempt", "kind", kind, "id", id, "version", version+1)
	}
	return version + 1, nil
}

// Delete removes the record if its stored version is version, or whatever
// its version when version is 0. Deleting a missing record is not an error.
func (s *Store) Delete(ctx context.Context, kind, id string, version int64) error {
	if err := s.guard.Check(ctx, kind, id); err != nil {
		return err
	}
	if version < 0 {
		return adapter.ConflictError(kind, id, version)
	}
	keys := []string{s.recordKey(kind, id), s.indexKey(kind)}
	var res int64
	err := s.do(ctx, func(ctx context.Context) error {
		var err error
		res, err = deleteScript.Run(ctx, s.client, keys, id, strconv.FormatInt(version, 10)).Int64()
		return err
	})
	if err != nil {
		return s.guard.Fail(ctx, "delete", err)
	}
	if res == 0 {
		return adapter.ConflictError(kind, id, version)
	}
	return nil
}

// List returns the records of kind whose id starts with prefix, ordered by
// id, at most limit of them (0 or less: no limit), starting after the id
// after. One List reads one consistent snapshot of the kind.
func (s *Store) List(ctx context.Context, kind, prefix, after string, limit int) ([]store.Record, error) {
	if err := adapter.CheckKind(kind); err != nil {
		return nil, err
	}
	if err := s.guard.Live(ctx); err != nil {
		return nil, err
	}
	lower, upper := lexRange(prefix, after)
	keys := []string{s.indexKey(kind)}
	args := []any{s.recordKeyBase(kind), lower, upper, strconv.Itoa(max(limit, 0))}
	var vals []any
	err := s.do(ctx, func(ctx context.Context) error {
		var err error
		vals, err = listScript.Run(ctx, s.client, keys, args...).Slice()
		if errors.Is(err, goredis.Nil) {
			// An empty table may come back as a nil reply.
			vals, err = nil, nil
		}
		return err
	})
	if err != nil {
		return nil, s.guard.Fail(ctx, "list", err)
	}
	if len(vals)%4 != 0 {
		return nil, fmt.Errorf("store/redis: list %s: reply of %d values", kind, len(vals))
	}
	out := make([]store.Record, 0, len(vals)/4)
	for i := 0; i < len(vals); i += 4 {
		id, ok := vals[i].(string)
		if !ok {
			return nil, fmt.Errorf("store/redis: list %s: id is a %T", kind, vals[i])
		}
		rec, err := decode(kind, id, vals[i+1], vals[i+2], vals[i+3])
		if err != nil {
			return nil, fmt.Errorf("store/redis: list %s/%s: %w", kind, id, err)
		}
		out = append(out, rec)
	}
	return out, nil
}

// Close stops the Store. Later calls of other methods return
// [store.ErrClosed]. A Store from [Open] closes its connections; one from
// [New] leaves the client to its owner. Close may be called more than once
// and returns the first call's result.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.guard.Close()
		if s.owned {
			if err := s.client.Close(); err != nil {
				s.closeErr = fmt.Errorf("store/redis: close: %w", err)
			}
		}
	})
	return s.closeErr
}

// do runs fn, the requests of one operation, and returns as soon as ctx is
// done even when the server does not answer: the requests then finish, or
// time out, on their own. fn must not touch the caller's memory.
func (s *Store) do(ctx context.Context, fn func(context.Context) error) error {
	if ctx.Done() == nil {
		return fn(ctx)
	}
	done := make(chan error, 1)
	go func() { done <- fn(ctx) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		// Prefer the result when it is already there.
		select {
		case err := <-done:
			return err
		default:
			return ctx.Err()
		}
	}
}

// decode makes a record from the hash fields v, d and t.
func decode(kind, id string, v, d, t any) (store.Record, error) {
	vs, ok1 := v.(string)
	ds, ok2 := d.(string)
	ts, ok3 := t.(string)
	if !ok1 || !ok2 || !ok3 {
		return store.Record{}, fmt.Errorf("malformed record: fields of types %T, %T, %T", v, d, t)
	}
	version, err := strconv.ParseInt(vs, 10, 64)
	if err != nil {
		return store.Record{}, fmt.Errorf("malformed version: %w", err)
	}
	nanos, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return store.Record{}, fmt.Errorf("malformed updated_at: %w", err)
	}
	return store.Record{Kind: kind, ID: id, Version: version, Data: []byte(ds), UpdatedAt: time.Unix(0, nanos)}, nil
}

// lexRange returns the ZRANGEBYLEX bounds of the ids that start with
// prefix and come after the id after.
func lexRange(prefix, after string) (lower, upper string) {
	// Every id with the prefix is >= prefix and < the prefix's successor;
	// after, when it is past prefix, is the tighter lower bound.
	switch {
	case after != "" && after >= prefix:
		lower = "(" + after
	case prefix != "":
		lower = "[" + prefix
	default:
		lower = "-"
	}
	upper = "+"
	if end, ok := adapter.PrefixEnd(prefix); ok {
		upper = "(" + end
	}
	return lower, upper
}
