package reactive_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/calf-go/calf/reactive"
	storemem "github.com/calf-go/calf/store/memory"
	"github.com/calf-go/calf/store/postgres"
	"github.com/calf-go/calf/store/storetest"
)

// TestMain runs this binary as a dispatching process when asked to.
func TestMain(m *testing.M) {
	if spec := os.Getenv("CALF_REACTIVE_DISPATCH"); spec != "" {
		if err := dispatchIn(spec); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if spec := os.Getenv("CALF_REACTIVE_CHILD"); spec != "" {
		if err := child(spec); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

type counter struct {
	N int `json:"n"`
}

func counterActions() *reactive.Actions[counter] {
	a := &reactive.Actions[counter]{}
	reactive.MustAction(a, "inc", func(s counter, _ struct{}) (counter, []string, error) {
		s.N++
		return s, []string{"n"}, nil
	})
	return a
}

// child dispatches inc n times to the store persisted in PostgreSQL:
// "URL|SCHEMA|N".
func child(spec string) error {
	parts := strings.SplitN(spec, "|", 3)
	n, _ := strconv.Atoi(parts[2])
	ctx := context.Background()
	pg, err := postgres.Open(ctx, parts[0], &postgres.Options{Schema: parts[1]})
	if err != nil {
		return err
	}
	defer pg.Close()
	s, err := reactive.NewStore("counter", counter{}, counterActions(), &reactive.Options{State: pg})
	if err != nil {
		return err
	}
	for range n {
		if _, err := s.Dispatch(ctx, "inc", nil); err != nil {
			return err
		}
	}
	return nil
}

func postgresURL(t *testing.T) string {
	t.Helper()
	u := os.Getenv("CALF_TEST_POSTGRES_URL")
	if u == "" {
		u = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, u)
	if err != nil {
		if os.Getenv("CALF_TEST_SERVICES") != "" {
			t.Fatalf("%s is unreachable: %v", u, err)
		}
		t.Skipf("%s is unreachable (set CALF_TEST_POSTGRES_URL): %v", u, err)
	}
	_ = c.Close(ctx)
	return u
}

// Two processes dispatch 1,000 increments each to one store persisted in
// PostgreSQL: the counter ends at 2,000, at version 2,000.
func TestTwoProcessesNoLostUpdate(t *testing.T) {
	u := postgresURL(t)
	schema := fmt.Sprintf("calf_reactive_%016x", rand.Uint64())
	pg, err := postgres.Open(t.Context(), u, &postgres.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = pg.Close()
		ctx := context.Background()
		if c, err := pgx.Connect(ctx, u); err == nil {
			_, _ = c.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
			_ = c.Close(ctx)
		}
	})
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	const each = 1000
	var cmds []*exec.Cmd
	for range 2 {
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), fmt.Sprintf("CALF_REACTIVE_CHILD=%s|%s|%d", u, schema, each))
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	for _, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("a dispatching process: %v", err)
		}
	}
	s, err := reactive.NewStore("counter", counter{}, counterActions(), &reactive.Options{State: pg})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := s.Get().N; got != 2*each || s.Version() != 2*each {
		t.Errorf("counter %d at version %d; want %d at %d", got, s.Version(), 2*each, 2*each)
	}
	// This process goes on from there.
	d := mustDispatch(t, s, "inc", nil)
	if d.Version != 2*each+1 || string(d.Before["n"]) != "2000" || string(d.After["n"]) != "2001" {
		t.Errorf("the next delta: %+v", d)
	}
}

// A store opened on a state store that holds its state starts from it, at
// its version; a failed read is NewStore's error.
func TestNewStoreStartsFromStoredState(t *testing.T) {
	st := storemem.New()
	t.Cleanup(func() { _ = st.Close() })
	empty, err := reactive.NewStore("counter", counter{N: 7}, counterActions(), &reactive.Options{State: st})
	if err != nil {
		t.Fatal(err)
	}
	if got := empty.Get().N; got != 7 || empty.Version() != 0 {
		t.Errorf("with nothing stored: %d at version %d; want the initial 7 at 0", got, empty.Version())
	}
	for range 3 {
		mustDispatch(t, empty, "inc", nil)
	}

	s, err := reactive.NewStore("counter", counter{}, counterActions(), &reactive.Options{State: st})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Get().N; got != 10 || s.Version() != 3 {
		t.Errorf("opened on the stored state: %d at version %d; want 10 at 3", got, s.Version())
	}
	if d := mustDispatch(t, s, "inc", nil); d.Version != 4 || string(d.Before["n"]) != "10" {
		t.Errorf("the next delta: %+v", d)
	}

	faulty := storetest.WithFaults(st, storetest.Faults{ReadFailRate: 1})
	if _, err := reactive.NewStore("counter", counter{}, counterActions(), &reactive.Options{State: faulty}); !errors.Is(err, storetest.ErrInjected) {
		t.Errorf("NewStore on a store that fails to read: %v", err)
	}
}
