package postgres_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/internal/testwait"
	"github.com/calf-go/calf/store"
	"github.com/calf-go/calf/store/postgres"
)

// withParam returns u with the query parameter k=v added.
func withParam(u, k, v string) string {
	sep := "?"
	if strings.Contains(u, "?") {
		sep = "&"
	}
	return u + sep + k + "=" + v
}

// freshSchema returns the name of a schema that does not exist, dropped
// with what it holds when the test ends.
func freshSchema(t *testing.T) string {
	t.Helper()
	name := "calf_t" + strings.ToLower(calf.NewID()[:10])
	conn := admin(t)
	t.Cleanup(func() {
		if _, err := conn.Exec(context.Background(), `DROP SCHEMA IF EXISTS `+pgx.Identifier{name}.Sanitize()+` CASCADE`); err != nil {
			t.Errorf("drop schema %s: %v", name, err)
		}
	})
	return name
}

// hasTable reports whether schema holds a calf_records table.
func hasTable(t *testing.T, schema string) bool {
	t.Helper()
	var n int
	err := admin(t).QueryRow(context.Background(),
		`SELECT count(*) FROM information_schema.tables WHERE table_schema = $1 AND table_name = 'calf_records'`, schema).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n == 1
}

// roundTrip writes and reads a record through s.
func roundTrip(t *testing.T, s store.Store) {
	t.Helper()
	ctx := t.Context()
	if _, err := s.Put(ctx, "k", "id1", []byte(`{"a":1}`), 0); err != nil {
		t.Fatal(err)
	}
	rec, err := s.Get(ctx, "k", "id1")
	if err != nil || string(rec.Data) != `{"a":1}` {
		t.Fatalf("Get = %+v, %v", rec, err)
	}
}

// The URL's schema parameter puts the store's tables in that schema,
// created when missing.
func TestSchemaFromURL(t *testing.T) {
	schema := freshSchema(t)
	s, err := postgres.Open(t.Context(), withParam(testURL(t), "schema", schema), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	roundTrip(t, s)
	if !hasTable(t, schema) {
		t.Errorf("no calf_records table in schema %s", schema)
	}
}

// The key=value form of the connection string takes the schema parameter
// too, and Options.Schema may repeat it.
func TestSchemaFromKeywordValueString(t *testing.T) {
	cfg, err := pgx.ParseConfig(testURL(t))
	if err != nil {
		t.Fatal(err)
	}
	schema := freshSchema(t)
	dsn := fmt.Sprintf("host=%s port=%d dbname=%s user=%s schema=%s",
		dsnValue(cfg.Host), cfg.Port, dsnValue(cfg.Database), dsnValue(cfg.User), dsnValue(schema))
	if cfg.Password != "" {
		dsn += " password=" + dsnValue(cfg.Password)
	}
	s, err := postgres.Open(t.Context(), dsn, &postgres.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	roundTrip(t, s)
	if !hasTable(t, schema) {
		t.Errorf("no calf_records table in schema %s", schema)
	}
}

// dsnValue quotes v for a key=value connection string.
func dsnValue(v string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v) + "'"
}

// A search_path whose schemas do not exist gets its first one created.
func TestSearchPathSchemaIsCreated(t *testing.T) {
	schema := freshSchema(t)
	s, err := postgres.Open(t.Context(), withParam(testURL(t), "search_path", schema), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	roundTrip(t, s)
	if !hasTable(t, schema) {
		t.Errorf("no calf_records table in schema %s", schema)
	}
}

func TestSchemaParameterErrors(t *testing.T) {
	u := testURL(t)
	_, err := postgres.Open(t.Context(), withParam(u, "schema", "a"), &postgres.Options{Schema: "b"})
	if err == nil || !strings.Contains(err.Error(), `schema "a" and Options.Schema "b"`) {
		t.Errorf("conflicting schemas: %v", err)
	}
	_, err = postgres.Open(t.Context(), withParam(u, "schema", ""), nil)
	if err == nil || !strings.Contains(err.Error(), "schema parameter is empty") {
		t.Errorf("empty schema: %v", err)
	}
}

// A role that may not create the missing schema of its search_path gets
// an error that names the schema and says what to do.
func TestSearchPathSchemaCreateRefused(t *testing.T) {
	ctx := t.Context()
	conn := admin(t)
	role := "calf_t" + strings.ToLower(calf.NewID()[:10])
	if _, err := conn.Exec(ctx, `CREATE ROLE `+pgx.Identifier{role}.Sanitize()+` LOGIN`); err != nil {
		t.Skipf("cannot create a role to open the store as: %v", err)
	}
	t.Cleanup(func() {
		if _, err := conn.Exec(context.Background(), `DROP ROLE IF EXISTS `+pgx.Identifier{role}.Sanitize()); err != nil {
			t.Errorf("drop role %s: %v", role, err)
		}
	})
	u := withParam(testURL(t), "user", role)
	var canCreate bool
	if err := conn.QueryRow(ctx, `SELECT has_database_privilege($1, current_database(), 'CREATE')`, role).Scan(&canCreate); err != nil {
		t.Fatal(err)
	}
	if canCreate {
		t.Skipf("a new role may create schemas in this database")
	}
	c, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Skipf("cannot log in as a new role: %v", err)
	}
	c.Close(ctx)

	schema := freshSchema(t)
	s, err := postgres.Open(ctx, withParam(u, "search_path", schema), nil)
	if err == nil {
		s.Close()
		t.Fatal("Open succeeded, want an error")
	}
	for _, want := range []string{`creating schema "` + schema + `" failed`, "create it", "?schema=NAME"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q: %v", want, err)
		}
	}
}

// poolConns blocks more lists than limit on a lock of the table of the
// Store opened with url and opts, each of which waits on a connection of
// its own (Gets, Puts and Deletes would wait together, batched on a
// quarter of the pool), and returns how many connections the Store then
// holds on the server.
func poolConns(t *testing.T, url string, opts *postgres.Options, limit int) int {
	t.Helper()
	app := opts.ApplicationName
	s, err := postgres.Open(t.Context(), url, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := t.Context()
	kind := "pool-" + app
	if _, err := s.Put(ctx, kind, "r", []byte("0"), 0); err != nil {
		t.Fatal(err)
	}
	// Lock the table, so that every list of it waits until the lock goes.
	tx, err := admin(t).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `LOCK TABLE `+opts.Schema+`.calf_records IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range limit + 3 {
		wg.Go(func() { _, _ = s.List(ctx, kind, "", "", 0) })
	}
	// Wait until limit connections are open, the lists waiting on the
	// lock. Once every list is done, the pool still holds, idle, each
	// connection it opened: more, had it let the others open their own.
	count := func() (n int, err error) {
		err = admin(t).QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&n)
		return n, err
	}
	testwait.ForErr(t, 10*time.Second, fmt.Sprintf("%d connections", limit), func() error {
		n, err := count()
		if err == nil && n < limit {
			err = fmt.Errorf("%d open", n)
		}
		return err
	})
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	n, err := count()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// The URL's pool_max_conns parameter bounds the Store's connections, as
// Options.MaxConns does.
func TestPoolMaxConnsFromURL(t *testing.T) {
	schema := newSchema(t)
	app := fmt.Sprintf("calf-test-%016x", rand.Uint64())
	url := withParam(testURL(t), "pool_max_conns", "3")
	if n := poolConns(t, url, &postgres.Options{Schema: schema, ApplicationName: app}, 3); n != 3 {
		t.Errorf("with pool_max_conns=3, the Store holds %d connections, want 3", n)
	}
	app = fmt.Sprintf("calf-test-%016x", rand.Uint64())
	if n := poolConns(t, testURL(t), &postgres.Options{Schema: schema, ApplicationName: app, MaxConns: 2}, 2); n != 2 {
		t.Errorf("with MaxConns 2, the Store holds %d connections, want 2", n)
	}
}

func TestPoolMaxConnsErrors(t *testing.T) {
	u := testURL(t)
	for _, tt := range []struct {
		url  string
		opts *postgres.Options
		want string
	}{
		{withParam(u, "pool_max_conns", "0"), nil, `pool_max_conns parameter is "0"`},
		{withParam(u, "pool_max_conns", "many"), nil, `pool_max_conns parameter is "many"`},
		{withParam(u, "pool_max_conns", "4"), &postgres.Options{MaxConns: 8}, "pool_max_conns=4 and Options.MaxConns 8"},
		{u, &postgres.Options{MaxConns: -1}, "MaxConns is -1"},
	} {
		s, err := postgres.Open(t.Context(), tt.url, tt.opts)
		if err == nil {
			s.Close()
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Open(%s, %+v) = %v, want an error containing %q", tt.url, tt.opts, err, tt.want)
		}
	}
	// The same value in both places is fine.
	s, err := postgres.Open(t.Context(), withParam(u, "pool_max_conns", "4"), &postgres.Options{Schema: newSchema(t), MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
}
