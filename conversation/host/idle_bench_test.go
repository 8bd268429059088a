package host_test

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/conversation"
	"github.com/calf-go/calf/conversation/docmem"
	"github.com/calf-go/calf/conversation/host"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/store"
	storemem "github.com/calf-go/calf/store/memory"
	"github.com/calf-go/calf/store/postgres"
	"github.com/calf-go/calf/store/sqlite"
)

// idlePrototypes: a conversational agent that starts two code agents, the
// docmem agent and an echo agent, so that a conversation has three
// instances.
var idlePrototypes = []conversation.Prototype{
	{Name: "conversational-agent", Kind: conversation.KindLLM, Role: "Orchestrator", SystemPrompt: "You talk with the user.",
		Subagents: []string{"docmem-agent", "echo-agent"}},
	{Name: "docmem-agent", Kind: conversation.KindCode, Role: "Tool executor for docmem operations"},
	{Name: "echo-agent", Kind: conversation.KindCode, Role: "Repeats what it is told"},
}

// idleAnswer is the conversational agent's answer to the user.
const idleAnswer = "Both agents are ready."

// idleModel is the conversational agent of an idle conversation: it starts
// both agents (one step, two calls), sends a command to each (one step,
// two calls), then answers the user.
func idleModel() modeltest.FunctionModel {
	return func(_ context.Context, req *model.Request) (*model.Response, error) {
		if _, ok := toolResult(req, "start_docmem"); !ok {
			return modeltest.ToolCalls(
				modeltest.Call("start_docmem", "start_conversation", `{"prototype":"docmem-agent"}`),
				modeltest.Call("start_echo", "start_conversation", `{"prototype":"echo-agent"}`)), nil
		}
		created, ok := toolResult(req, "send_docmem")
		if !ok {
			return modeltest.ToolCalls(
				modeltest.Call("send_docmem", "send", `{"agent":"docmem-agent","command":["docmem-create","notes","Notes"]}`),
				modeltest.Call("send_echo", "send", `{"agent":"echo-agent","message":"hello"}`)), nil
		}
		echoed, _ := toolResult(req, "send_echo")
		if !strings.Contains(created, `"ok":true`) || echoed != "hello" {
			return modeltest.Text("failed: " + created + " / " + echoed), nil
		}
		return modeltest.Text(idleAnswer), nil
	}
}

// idleHost is a host of idlePrototypes on the memory broker and a store,
// with the user's side counting answers (it keeps nothing per
// conversation, so that the process's footprint is the host's).
type idleHost struct {
	tb     testing.TB
	st     store.Store
	client *calf.Client
	convs  *conversation.Conversations

	answered atomic.Int64
	wrong    atomic.Int64
	done     chan struct{} // a token per answer
}

func newIdleHost(tb testing.TB, st store.Store) *idleHost {
	tb.Helper()
	ctx := tb.Context()
	client := calf.NewClient(memory.New(nil), nil)
	tb.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = client.Shutdown(sctx)
	})
	rt := agent.NewRuntime(client, st, nil)
	convs := conversation.NewConversations(st, nil)
	if err := convs.Prototypes().RegisterAll(ctx, idlePrototypes, false); err != nil {
		tb.Fatal(err)
	}
	echo := func(_ context.Context, req host.CodeRequest) (string, error) { return req.Message.Message, nil }
	h := host.New(rt, convs, &host.Options{
		Model: func(string) (model.Model, error) { return idleModel(), nil },
		Code:  map[string]host.CodeHandler{"docmem-agent": docmem.New(st, nil).CodeHandler(), "echo-agent": echo},
	})
	if err := h.Serve(ctx); err != nil {
		tb.Fatal(err)
	}
	e := &idleHost{tb: tb, st: st, client: client, convs: convs, done: make(chan struct{}, 1<<16)}
	err := client.Handle(ctx, "calf.conv.*.*.user", func(_ context.Context, msg *calf.Message) error {
		m, err := conversation.DecodeMessage(msg.Data)
		if err != nil {
			return calf.Permanent(err)
		}
		if m.Message != idleAnswer {
			if e.wrong.Add(1) == 1 {
				tb.Errorf("answer %q", m.Message)
			}
		}
		e.answered.Add(1)
		e.done <- struct{}{}
		return nil
	}, &calf.SubscribeOptions{Group: "user-side"})
	if err != nil {
		tb.Fatal(err)
	}
	return e
}

// converse creates n conversations, each answered once (its three
// instances started, a document created, an echo), at most inFlight at a
// time, and returns when all are answered and nothing is left running.
func (e *idleHost) converse(n, inFlight int) {
	e.tb.Helper()
	ctx := e.tb.Context()
	sem := make(chan struct{}, inFlight)
	var wg sync.WaitGroup
	var failed atomic.Pointer[error]
	for range n {
		if failed.Load() != nil {
			break
		}
		select {
		case sem <- struct{}{}:
		case <-e.done:
			// An answer frees a slot; its own token is taken by the
			// wait below.
			<-sem
			sem <- struct{}{}
		}
		wg.Go(func() {
			c, err := e.convs.Create(ctx, conversation.NewConversation{UserID: "u1", Description: "idle"})
			if err == nil {
				var ch string
				ch, err = conversation.Channel(c.ID, conversation.UserParticipant, c.Entry)
				if err == nil {
					m := conversation.ConversationMessage{ConversationID: c.ID, UserID: "u1", Message: "Start your agents", Timestamp: time.Now().UTC()}
					_, err = e.client.Emit(ctx, ch, m, calf.WithKey(c.ID))
				}
			}
			if err != nil {
				failed.CompareAndSwap(nil, &err)
			}
		})
	}
	wg.Wait()
	if p := failed.Load(); p != nil {
		e.tb.Fatal(*p)
	}
	// Drain the tokens of the answers still outstanding.
	deadline := time.After(5 * time.Minute)
	for len(sem) > 0 {
		select {
		case <-e.done:
			<-sem
		case <-deadline:
			e.tb.Fatalf("%d conversations not answered", len(sem))
		}
	}
}

// settledGoroutines waits until the number of goroutines has not changed
// for two seconds (the memory broker's idle workers exit after a second)
// and returns it; after 20 s it returns the lowest seen.
func settledGoroutines() int {
	low, last, since := runtime.NumGoroutine(), -1, time.Now()
	for start := time.Now(); time.Since(start) < 20*time.Second; time.Sleep(100 * time.Millisecond) {
		n := runtime.NumGoroutine()
		low = min(low, n)
		if n != last {
			last, since = n, time.Now()
		} else if time.Since(since) >= 2*time.Second {
			return n
		}
	}
	return low
}

// TestIdleConversationsGoroutines: the host keeps no goroutine per idle
// conversation or instance. The goroutines after 30 conversations (90
// instances, each answered once, then idle) and after 300 (900) differ by
// less than a bound that does not depend on the number: a goroutine per
// idle instance would add 810.
func TestIdleConversationsGoroutines(t *testing.T) {
	e := newIdleHost(t, storemem.New())
	e.converse(30, 8)
	g1 := settledGoroutines()
	e.converse(270, 8)
	g2 := settledGoroutines()
	if n := e.answered.Load(); n != 300 {
		t.Fatalf("%d answers; want 300", n)
	}
	t.Logf("goroutines: %d after 30 idle conversations, %d after 300", g1, g2)
	if g2-g1 > 30 {
		t.Errorf("goroutines grew by %d from 30 to 300 idle conversations; want at most 30, whatever the number", g2-g1)
	}
}

// idleStore is a store under measure: its size and its bytes by kind.
type idleStore struct {
	store.Store
	// size returns the bytes the store takes: the SQLite files, or the
	// PostgreSQL table with its indexes and TOAST.
	size func(ctx context.Context) (int64, error)
	// kinds returns, by record kind, the records and the bytes of their
	// data.
	kinds func(ctx context.Context) (map[string][2]int64, error)
}

// openIdleSQLite opens a SQLite store in a temporary directory.
func openIdleSQLite(b *testing.B) *idleStore {
	path := filepath.Join(b.TempDir(), "idle.db")
	s, err := sqlite.Open(path, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = db.Close() })
	return &idleStore{Store: s,
		size: func(context.Context) (int64, error) {
			var n int64
			for _, p := range []string{path, path + "-wal", path + "-shm"} {
				if fi, err := os.Stat(p); err == nil {
					n += fi.Size()
				}
			}
			return n, nil
		},
		kinds: func(ctx context.Context) (map[string][2]int64, error) {
			return kindBytes(ctx, func(ctx context.Context, q string) (kindRows, error) {
				rows, err := db.QueryContext(ctx, q)
				return rows, err
			}, `SELECT kind, count(*), sum(length(data)) FROM records GROUP BY kind`)
		},
	}
}

// openIdlePostgres opens a PostgreSQL store in a schema of its own,
// dropped at the end.
func openIdlePostgres(b *testing.B) *idleStore {
	u := os.Getenv("CALF_TEST_POSTGRES_URL")
	if u == "" {
		u = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	ctx := b.Context()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		if os.Getenv("CALF_TEST_SERVICES") != "" {
			b.Fatalf("%s is unreachable: %v", u, err)
		}
		b.Skipf("%s is unreachable (set CALF_TEST_POSTGRES_URL): %v", u, err)
	}
	schema := fmt.Sprintf("calf_idle_%016x", rand.Uint64())
	s, err := postgres.Open(ctx, u, &postgres.Options{Schema: schema})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = s.Close()
		_, _ = conn.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
		_ = conn.Close(context.Background())
	})
	table := pgx.Identifier{schema, "calf_records"}.Sanitize()
	return &idleStore{Store: s,
		size: func(ctx context.Context) (int64, error) {
			var n int64
			err := conn.QueryRow(ctx, "SELECT pg_total_relation_size($1::regclass)", table).Scan(&n)
			return n, err
		},
		kinds: func(ctx context.Context) (map[string][2]int64, error) {
			return kindBytes(ctx, func(ctx context.Context, q string) (kindRows, error) {
				rows, err := conn.Query(ctx, q)
				if err != nil {
					return nil, err
				}
				return pgRows{rows}, nil
			}, `SELECT convert_from(kind, 'UTF8'), count(*), sum(octet_length(data)) FROM `+table+` GROUP BY kind`)
		},
	}
}

type kindRows interface {
	Next() bool
	Scan(...any) error
	Err() error
	Close() error
}

type pgRows struct{ pgx.Rows }

func (r pgRows) Close() error { r.Rows.Close(); return nil }

func kindBytes(ctx context.Context, query func(context.Context, string) (kindRows, error), q string) (map[string][2]int64, error) {
	rows, err := query(ctx, q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string][2]int64{}
	for rows.Next() {
		var kind string
		var n, bytes int64
		if err := rows.Scan(&kind, &n, &bytes); err != nil {
			return nil, err
		}
		out[kind] = [2]int64{n, bytes}
	}
	return out, rows.Err()
}

// rssBytes returns the process's resident set size, from /proc/self/status
// (0 where there is none).
func rssBytes() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n << 10
		}
	}
	return 0
}

// idlePoint is what is measured after a number of idle conversations.
type idlePoint struct {
	conversations int
	storeBytes    int64
	rss, heap     int64
	goroutines    int
	kinds         map[string][2]int64
}

// BenchmarkIdleConversations creates conversations of three instances each
// (the conversational agent, the docmem agent and an echo agent, started by
// the conversational agent's one turn, which creates a document and sends
// an echo) on a host on the memory broker, with a SQLite and a PostgreSQL
// store, and measures, after a tenth, half and all of them (idle: every
// message answered): the store's bytes per instance, the process's RSS and
// live heap after a GC, and its goroutines once settled. It prints a table
// of the three points and the store's records by kind, and reports the
// growth of each per instance added over the second half (when the
// runtime's bounded caches are full), which is flat (zero) for what keeps
// nothing per idle instance.
// CALF_IDLE_CONVERSATIONS sets the number (default 10,000); run it with
// -benchtime 1x.
func BenchmarkIdleConversations(b *testing.B) {
	n := 10_000
	if v, err := strconv.Atoi(os.Getenv("CALF_IDLE_CONVERSATIONS")); err == nil && v > 0 {
		n = v
	}
	for _, kind := range []string{"sqlite", "postgres"} {
		b.Run(kind, func(b *testing.B) {
			for b.Loop() {
				var st *idleStore
				if kind == "sqlite" {
					st = openIdleSQLite(b)
				} else {
					st = openIdlePostgres(b)
				}
				benchIdle(b, st, n)
			}
		})
	}
}

func benchIdle(b *testing.B, st *idleStore, n int) {
	ctx := b.Context()
	e := newIdleHost(b, st)
	var points []idlePoint
	done := 0
	start := time.Now()
	for _, at := range []int{max(1, n/10), max(1, n/2), n} {
		if at <= done {
			continue
		}
		e.converse(at-done, 32)
		done = at
		g := settledGoroutines()
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		size, err := st.size(ctx)
		if err != nil {
			b.Fatal(err)
		}
		kinds, err := st.kinds(ctx)
		if err != nil {
			b.Fatal(err)
		}
		p := idlePoint{conversations: at, storeBytes: size, rss: rssBytes(), heap: int64(ms.HeapAlloc), goroutines: g, kinds: kinds}
		points = append(points, p)
		b.Logf("%d conversations (%s): store %.1f MiB, RSS %.1f MiB, heap %.1f MiB, %d goroutines",
			at, time.Since(start).Round(time.Second), float64(size)/(1<<20), float64(p.rss)/(1<<20), float64(p.heap)/(1<<20), g)
	}
	if got := e.answered.Load(); got != int64(n) || e.wrong.Load() != 0 {
		b.Fatalf("%d answers (%d wrong); want %d", got, e.wrong.Load(), n)
	}
	last := points[len(points)-1]
	if got := last.kinds["conversation_instance"][0]; got != int64(3*n) {
		b.Fatalf("%d instances; want %d", got, 3*n)
	}

	var sb strings.Builder
	fmt.Fprintf(&sb, "\n| conversations | instances | store | store B/instance | RSS | heap | goroutines |\n|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, p := range points {
		fmt.Fprintf(&sb, "| %d | %d | %.1f MiB | %d | %.1f MiB | %.1f MiB | %d |\n", p.conversations, 3*p.conversations,
			float64(p.storeBytes)/(1<<20), p.storeBytes/int64(3*p.conversations), float64(p.rss)/(1<<20), float64(p.heap)/(1<<20), p.goroutines)
	}
	fmt.Fprintf(&sb, "\n| kind | records | data bytes | per instance |\n|---|---:|---:|---:|\n")
	names := make([]string, 0, len(last.kinds))
	for k := range last.kinds {
		names = append(names, k)
	}
	sort.Strings(names)
	var total int64
	for _, k := range names {
		v := last.kinds[k]
		total += v[1]
		fmt.Fprintf(&sb, "| %s | %d | %d | %.0f |\n", k, v[0], v[1], float64(v[1])/float64(3*n))
	}
	fmt.Fprintf(&sb, "| all | | %d | %.0f |\n", total, float64(total)/float64(3*n))
	fmt.Printf("%s, %d conversations:\n%s\n", b.Name(), n, sb.String())

	b.ReportMetric(float64(last.storeBytes)/float64(3*n), "store-B/instance")
	b.ReportMetric(float64(total)/float64(3*n), "data-B/instance")
	b.ReportMetric(float64(last.rss)/(1<<20), "MiB-RSS")
	b.ReportMetric(float64(last.goroutines), "goroutines")
	// The growth over the second half: the in-process caches (decoded run
	// states, sessions) are full by then.
	if len(points) > 1 {
		first := points[len(points)-2]
		added := float64(3 * (last.conversations - first.conversations))
		b.ReportMetric(float64(last.storeBytes-first.storeBytes)/added, "store-B/added-instance")
		b.ReportMetric(float64(last.rss-first.rss)/added, "RSS-B/added-instance")
		b.ReportMetric(float64(last.heap-first.heap)/added, "heap-B/added-instance")
		b.ReportMetric(float64(last.goroutines-first.goroutines)/added, "goroutines/added-instance")
	}
}
