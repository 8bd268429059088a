package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/calf-go/calf/internal/testwait"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
)

// calf serve offers the agent over the OpenAI-compatible API.
func TestServe(t *testing.T) {
	isolate(t)
	srv, _ := newFakeServer(t)
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"--addr", "0.0.0.0:0"}, "bearer tokens"},
		{[]string{"--addr", "nonsense"}, `--addr "nonsense" is not a valid address`},
		{[]string{"--addr", "127.0.0.1:http"}, "is not a valid address"},
		{[]string{"--addr", "127.0.0.1:70000"}, "is not a valid address"},
		{[]string{"--token", "short"}, "at least 16"},
		{[]string{"--token", ":0123456789abcdef"}, "USER:TOKEN"},
		{[]string{"--token", "a:0123456789abcdef", "--token", "b:0123456789abcdef"}, "same token"},
	} {
		args := append([]string{"serve", "--store", "memory:", "--model", srv.URL() + "#m"}, c.args...)
		if got := runMain(t.Context(), "", args...); got.code != exitUsage || !strings.Contains(got.stderr, c.says) {
			t.Errorf("calf %v: %d %q, want usage error with %q", args, got.code, got.stderr, c.says)
		}
	}
	addr := freeAddr(t)
	t.Setenv(envServeToken, "ann:ann-0123456789abcdef,bob:bob-0123456789abcdef")
	serveInBackground(t, "serve", "--store", "memory:", "--model", srv.URL()+"#m", "--addr", addr)
	waitListening(t, addr)
	post := func(token, session, body string) (int, string) {
		req, _ := http.NewRequestWithContext(t.Context(), "POST", "http://"+addr+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		if session != "" {
			req.Header.Set("Calf-Session-Id", session)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(data)
	}
	status, body := post("ann-0123456789abcdef", "ann-s", `{"model":"assistant","messages":[{"role":"user","content":"hello"}]}`)
	var cc struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal([]byte(body), &cc); status != 200 || err != nil || len(cc.Choices) != 1 || cc.Choices[0].Message.Content != "You said: hello" {
		t.Fatalf("ann: %d %s", status, body)
	}
	if status, body := post("bob-0123456789abcdef", "ann-s", `{"model":"assistant","messages":[{"role":"user","content":"hello"}]}`); status != 404 {
		t.Errorf("bob in ann's session: %d %s", status, body)
	}
	if status, body := post("eve-0123456789abcdef", "", `{"model":"assistant","messages":[{"role":"user","content":"hello"}]}`); status != 401 {
		t.Errorf("a wrong token: %d %s", status, body)
	}
}

// calf serve records the runs' events: a run's event stream ends with its
// output.
func TestServeRunEvents(t *testing.T) {
	isolate(t)
	srv, _ := newFakeServer(t)
	addr := freeAddr(t)
	serveInBackground(t, "serve", "--store", "memory:", "--model", srv.URL()+"#m", "--addr", addr)
	waitListening(t, addr)
	resp, err := http.Post("http://"+addr+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"assistant","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	run := resp.Header.Get("Calf-Run-Id")
	if resp.StatusCode != 200 || run == "" {
		t.Fatalf("chat: %d, run %q", resp.StatusCode, run)
	}
	ev, err := http.Get("http://" + addr + "/v1/runs/" + run + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer ev.Body.Close()
	data, err := io.ReadAll(ev.Body)
	if err != nil {
		t.Fatal(err)
	}
	body := string(data)
	if !strings.Contains(body, "id: "+run+"/1\n") || !strings.Contains(body, `"channel":"calf.agent.assistant.output"`) || !strings.HasSuffix(strings.TrimSpace(body), `data: {"run":"`+run+`"}`) {
		t.Errorf("events:\n%s", body)
	}
}

// calf serve killed with SIGKILL in the middle of a run, on the embedded
// default (the in-process broker, SQLite), and started again: the run goes
// on from the store, and its events, followed from the start, end with its
// answer.
func TestServeRecoversAfterKill(t *testing.T) {
	dir := t.TempDir()
	bin := buildCalf(t, dir, "test")
	calls := make(chan struct{}, 10)
	var n atomic.Int32
	srv := modeltest.NewServer(func(ctx context.Context, req *model.Request) (*model.Response, error) {
		calls <- struct{}{}
		if n.Add(1) == 1 {
			<-ctx.Done() // the first call never answers: its process is killed
			return nil, ctx.Err()
		}
		return modeltest.Text("after the restart"), nil
	})
	t.Cleanup(srv.Close)
	addr := freeAddr(t)
	env := calfEnv(dir, envAPIKey+"=test")
	start := func() *exec.Cmd {
		cmd := exec.Command(bin, "serve", "--store", "sqlite:"+filepath.Join(dir, "calf.db"), "--model", srv.URL()+"#m", "--addr", addr)
		cmd.Env = env
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		waitListening(t, addr)
		return cmd
	}
	first := start()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", "http://"+addr+"/v1/chat/completions", strings.NewReader(`{"model":"assistant","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Calf-On-Disconnect", "continue")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	run := resp.Header.Get("Calf-Run-Id")
	if resp.StatusCode != 200 || run == "" {
		t.Fatalf("chat: %d, run %q", resp.StatusCode, run)
	}
	select {
	case <-calls:
	case <-ctx.Done():
		t.Fatal("the model was not called")
	}
	// Once the log has the model call (on the in-process broker, what is
	// not logged yet when the process dies is not logged), kill it.
	lreq, _ := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/v1/runs/"+run+"/events", nil)
	lresp, err := http.DefaultClient.Do(lreq)
	if err != nil {
		t.Fatal(err)
	}
	for sc := bufio.NewScanner(lresp.Body); sc.Scan() && !strings.Contains(sc.Text(), `"channel":"calf.agent.assistant.inference"`); {
	}
	if err := first.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()
	resp.Body.Close()
	lresp.Body.Close()

	start()
	greq, _ := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/v1/runs/"+run+"/events", nil)
	ev, err := http.DefaultClient.Do(greq)
	if err != nil {
		t.Fatal(err)
	}
	defer ev.Body.Close()
	data, err := io.ReadAll(ev.Body)
	if err != nil {
		t.Fatalf("the run's events after the restart: %v\n%s", err, data)
	}
	body := string(data)
	if !strings.Contains(body, `"channel":"calf.agent.assistant.input"`) || !strings.Contains(body, "after the restart") || !strings.HasSuffix(strings.TrimSpace(body), `data: {"run":"`+run+`"}`) {
		t.Errorf("the run's events after the restart:\n%s", body)
	}
	if n := strings.Count(body, `"channel":"calf.agent.assistant.inference"`); n != 1 {
		t.Errorf("%d inference events logged, want 1 (the one published again is the same):\n%s", n, body)
	}
}

// calf serve says where its API, its web chat and its run inspector are.
func TestServePrintsURLs(t *testing.T) {
	isolate(t)
	srv, _ := newFakeServer(t)
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(t.Context())
	var stderr bytes.Buffer
	code := make(chan int, 1)
	go func() {
		code <- Main(ctx, []string{"serve", "--store", "memory:", "--model", srv.URL() + "#m", "--addr", addr}, strings.NewReader(""), io.Discard, &stderr)
	}()
	waitListening(t, addr)
	cancel()
	if c := <-code; c != exitOK {
		t.Fatalf("calf serve exited %d: %s", c, stderr.String())
	}
	for _, url := range []string{"http://" + addr + "/v1 ", "http://" + addr + "/\n", "http://" + addr + "/inspect.html\n"} {
		if !strings.Contains(stderr.String(), url) {
			t.Errorf("calf serve does not print %s:\n%s", url, stderr.String())
		}
	}
}

// calf serve --agents offers the file's conversations: one created over
// HTTP, a message posted, and the conversation read back with the answer
// of its entry instance, served in the process on the embedded default.
func TestServeConversations(t *testing.T) {
	isolate(t)
	srv, _ := newFakeServer(t)
	file := convAgentsFile(t, srv.URL())
	addr := freeAddr(t)
	serveInBackground(t, "serve", "--store", "sqlite:"+filepath.Join(t.TempDir(), "calf.db"), "--agents", file, "--addr", addr)
	waitListening(t, addr)
	do := func(method, path, body string, want int) []byte {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), method, "http://"+addr+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != want {
			t.Fatalf("%s %s: %d %s, want %d", method, path, resp.StatusCode, data, want)
		}
		return data
	}
	var c struct {
		ID    string `json:"id"`
		Entry string `json:"entry"`
	}
	if err := json.Unmarshal(do("POST", "/v1/conversations", `{"description":"From the API"}`, http.StatusCreated), &c); err != nil || c.ID == "" {
		t.Fatalf("created %+v, %v", c, err)
	}
	do("POST", "/v1/conversations/"+c.ID+"/messages", `{"message":"hello there"}`, http.StatusAccepted)
	testwait.ForErr(t, 20*time.Second, "the answer in the conversation", func() error {
		var v struct {
			Messages []struct {
				From    string `json:"from"`
				To      string `json:"to"`
				Message string `json:"message"`
			} `json:"messages"`
		}
		data := do("GET", "/v1/conversations/"+c.ID, "", http.StatusOK)
		if err := json.Unmarshal(data, &v); err != nil {
			t.Fatal(err)
		}
		if len(v.Messages) != 2 {
			return fmt.Errorf("the conversation: %s", data)
		}
		if m := v.Messages[1]; m.From != c.Entry || m.To != "user" || m.Message != "You said: hello there" {
			t.Fatalf("the answer: %+v", m)
		}
		return nil
	})
}
