package reactive_test

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/adapters"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/reactive"
)

// natsURL returns the test NATS server's URL with a stream and prefix of
// the test's own.
func natsURL(t *testing.T) string {
	t.Helper()
	u := os.Getenv("CALF_TEST_NATS_URL")
	if u == "" {
		u = "nats://127.0.0.1:4222"
	}
	pu, err := url.Parse(u)
	if err == nil {
		var c net.Conn
		if c, err = net.DialTimeout("tcp", pu.Host, 2*time.Second); err == nil {
			c.Close()
		}
	}
	if err != nil {
		if os.Getenv("CALF_TEST_SERVICES") != "" {
			t.Fatalf("%s is unreachable: %v", u, err)
		}
		t.Skipf("%s is unreachable (set CALF_TEST_NATS_URL): %v", u, err)
	}
	ns := "rx" + calf.NewID()[:10]
	return u + "?stream=" + strings.ToUpper(ns) + "&prefix=" + ns
}

// dispatchIn is a child process: it opens the chain store on the broker
// and state store given, and dispatches one action: "BROKER|STORE|ACTION".
func dispatchIn(spec string) error {
	parts := strings.SplitN(spec, "|", 3)
	ctx := context.Background()
	b, err := adapters.OpenBroker(ctx, parts[0], nil)
	if err != nil {
		return err
	}
	defer b.Close()
	st, err := adapters.OpenStore(ctx, parts[1], nil)
	if err != nil {
		return err
	}
	defer st.Close()
	c := calf.NewClient(b, nil)
	defer c.Close()
	s, err := reactive.NewStore("chain", initialChain(), chainActions(), &reactive.Options{State: st, Client: c})
	if err != nil {
		return err
	}
	// The app's definition, for its actions; this process serves nothing.
	if _, err := reactive.NewApp(s, []reactive.AppAgent[chainState]{summarizerAgent(modeltest.NewTestModel())}); err != nil {
		return err
	}
	_, err = s.Dispatch(ctx, parts[2], true)
	return err
}

// A state-triggered agent served in this process reacts to a change that
// another process dispatches, through NATS and a shared state store.
func TestAgentReactsToAnotherProcessNATS(t *testing.T) {
	brokerURL := natsURL(t)
	storeURL := "sqlite:" + filepath.Join(t.TempDir(), "state.db")
	ctx := t.Context()
	b, err := adapters.OpenBroker(ctx, brokerURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	st, err := adapters.OpenStore(ctx, storeURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c := calf.NewClient(b, nil)
	defer c.Close()
	s, err := reactive.NewStore("chain", initialChain(), chainActions(), &reactive.Options{State: st, Client: c})
	if err != nil {
		t.Fatal(err)
	}
	sum := summarizerAgent(modeltest.FunctionModel(func(context.Context, *model.Request) (*model.Response, error) {
		return choose("set_summary", "from another process"), nil
	}))
	app, err := reactive.NewApp(s, []reactive.AppAgent[chainState]{sum})
	if err != nil {
		t.Fatal(err)
	}
	rt := agent.NewRuntime(c, st, nil)
	if err := app.Serve(ctx, rt); err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("CALF_REACTIVE_DISPATCH=%s|%s|summarizer.act", brokerURL, storeURL))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the dispatching process: %v\n%s", err, out)
	}
	e := &chainEnv{rt: rt, store: s}
	got := e.wait(t, "the summary", func(s chainState) bool { return s.Summary != "" && !s.Agents.Summarizer.ShouldAct })
	if got.Summary != "from another process" {
		t.Errorf("summary %q", got.Summary)
	}
}
