package main

import (
	"bytes"
	"context"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
)

// noModelMessage is what calf prints when no model is configured.
const noModelMessage = "calf: no model configured. Set OPENAI_API_KEY for OpenAI, or point at any OpenAI-compatible server " +
	"with OPENAI_BASE_URL=http://127.0.0.1:11434/v1 (Ollama) or --model http://HOST:PORT/v1#MODEL.\n"

// isolate clears the environment variables calf reads and points the
// default store into a temporary directory.
func isolate(t *testing.T) {
	t.Helper()
	for _, k := range []string{envAPIKey, envBaseURL, envModel, "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL",
		"GEMINI_API_KEY", "GOOGLE_API_KEY", "GEMINI_BASE_URL", "OLLAMA_HOST", "AZURE_OPENAI_ENDPOINT", "AZURE_OPENAI_API_KEY"} {
		t.Setenv(k, "")
	}
	t.Setenv("XDG_DATA_HOME", t.TempDir())
}

// result is the outcome of one call of Main.
type result struct {
	code           int
	stdout, stderr string
}

// runMain calls Main with args and stdin, and returns what it printed.
func runMain(ctx context.Context, stdin string, args ...string) result {
	var stdout, stderr bytes.Buffer
	code := Main(ctx, args, strings.NewReader(stdin), &stdout, &stderr)
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// fakeModel answers the chat completions of a modeltest.Server and records
// them. A request that offers tools is answered, the first time, with some
// text and a call of read_file on note.txt; a request that ends with a tool
// result with the first line of that result; any other with the text of
// the last user message.
type fakeModel struct {
	mu     sync.Mutex
	reqs   []*model.Request
	models []string
}

func (f *fakeModel) handle(ctx context.Context, req *model.Request) (*model.Response, error) {
	f.mu.Lock()
	f.reqs = append(f.reqs, req)
	f.models = append(f.models, modeltest.RequestedModel(ctx))
	f.mu.Unlock()
	last := req.Messages[len(req.Messages)-1]
	switch {
	case last.Role == model.RoleTool:
		// read_file numbers lines: "     1\tfirst line".
		first, _, _ := strings.Cut(last.Text(), "\n")
		_, text, _ := strings.Cut(first, "\t")
		return modeltest.Text("The note says: " + text), nil
	case len(req.Tools) > 0:
		resp := modeltest.ToolCalls(modeltest.Call("call_1", "read_file", `{"path": "note.txt"}`))
		resp.Message.Parts = []model.Part{model.TextPart("Let me read it.")}
		return resp, nil
	}
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == model.RoleUser {
			return modeltest.Text("You said: " + req.Messages[i].Text()), nil
		}
	}
	return modeltest.Text("nothing to answer"), nil
}

func (f *fakeModel) requests() []*model.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*model.Request(nil), f.reqs...)
}

func (f *fakeModel) requestedModels() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.models...)
}

// newFakeServer starts a fake OpenAI-compatible server answered by a new
// fakeModel.
func newFakeServer(t *testing.T) (*modeltest.Server, *fakeModel) {
	t.Helper()
	f := &fakeModel{}
	srv := modeltest.NewServer(f.handle)
	t.Cleanup(srv.Close)
	return srv, f
}

func TestNoModel(t *testing.T) {
	for _, tc := range []struct {
		name      string
		calfModel string
		args      []string
	}{
		{name: "default", args: []string{"run", "hello"}},
		{name: "openai model", args: []string{"run", "--model", "openai:gpt-4o", "hello"}},
		{name: "bare name", args: []string{"run", "--model", "llama3.2", "hello"}},
		{name: "CALF_MODEL", calfModel: "gpt-4o", args: []string{"run", "hello"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			isolate(t)
			t.Setenv(envModel, tc.calfModel)
			got := runMain(t.Context(), "", tc.args...)
			want := result{code: exitUsage, stderr: noModelMessage}
			if diff := cmp.Diff(want, got, cmp.AllowUnexported(result{})); diff != "" {
				t.Errorf("Main(%q) (-want +got):\n%s", tc.args, diff)
			}
		})
	}
}

func TestUsageErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		want string // in stderr
	}{
		{"unknown store scheme", []string{"run", "--store", "mysql://127.0.0.1:3306/calf", "hi"},
			`calf: --store: store mysql://127.0.0.1:3306/calf: adapters: unknown scheme "mysql": known schemes: memory, postgres, postgresql, redis, rediss, sqlite`},
		{"store without scheme", []string{"run", "--store", "calf.db", "hi"}, `--store calf.db: no scheme: a SQLite file is sqlite:calf.db`},
		{"memory store with a location", []string{"run", "--store", "memory:x", "hi"}, `memory: takes nothing after the scheme`},
		{"unknown broker scheme", []string{"run", "--broker", "amqp://h", "hi"}, `--broker: broker amqp://h: adapters: unknown scheme "amqp"`},
		{"bad broker URL", []string{"run", "--broker", "nats://", "hi"}, `--broker: broker nats://: adapters: bad URL: no host`},
		{"agent flag with a remote broker", []string{"run", "--broker", "nats://127.0.0.1:4222", "--read", ".", "hi"},
			"--read configures the agent, which the calf worker processes on nats://127.0.0.1:4222 serve"},
		{"worker without broker", []string{"worker"}, "calf worker needs --broker"},
		{"worker on the memory broker", []string{"worker", "--broker", "memory://"}, "reachable only from inside this process"},
		{"worker on an embedded broker", []string{"worker", "--broker", "nats+embedded://" + dir}, "reachable only from inside this process"},
		{"worker with an unknown agent", []string{"worker", "--broker", "nats://127.0.0.1:4222", "--agent", "bob"}, `--agent "bob": unknown agent; known: assistant`},
		{"worker with arguments", []string{"worker", "--broker", "nats://127.0.0.1:4222", "now"}, "calf worker takes no arguments"},
		{"worker with a memory store", []string{"worker", "--broker", "nats://127.0.0.1:4222", "--store", "memory:"}, "keeps state inside this process"},
		{"worker with a bad store", []string{"worker", "--broker", "nats://127.0.0.1:4222", "--store", "x"}, "--store x: no scheme: a SQLite file is sqlite:x"},
		{"show without id", []string{"deadletters", "show"}, "calf deadletters show needs one dead letter id"},
		{"replay without broker", []string{"deadletters", "replay", "x"}, "calf deadletters replay needs --broker"},
		{"replay on the memory broker", []string{"deadletters", "replay", "--broker", "memory://", "x"}, "no worker is reachable there"},
		{"no prompt", []string{"run"}, "run needs a prompt"},
		{"empty prompt", []string{"run", "  "}, "the prompt is empty"},
		{"unknown flag", []string{"run", "--frobnicate", "hi"}, "unknown flag: --frobnicate"},
		{"unknown command", []string{"fly"}, `unknown command "fly"`},
		{"json and quiet", []string{"run", "--json", "--quiet", "hi"}, "[json quiet] were all set"},
		{"zero timeout", []string{"run", "--timeout", "0s", "hi"}, "--timeout must be positive"},
		{"bad timeout", []string{"run", "--timeout", "soon", "hi"}, `invalid argument "soon"`},
		{"zero max turns", []string{"run", "--max-turns", "0", "hi"}, "--max-turns must be positive"},
		{"missing read dir", []string{"run", "--read", dir + "/missing", "hi"}, "--read: "},
		{"model URL without host", []string{"run", "--model", "http://", "hi"}, `--model: models: invalid base URL "http://"`},
		{"provider without name", []string{"run", "--model", "openai:", "hi"}, `no model name after "openai:"`},
		{"version with arguments", []string{"version", "now"}, "calf version takes no arguments"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			isolate(t)
			// A key, so that only the error under test stops the command.
			t.Setenv(envAPIKey, "sk-test")
			got := runMain(t.Context(), "", tc.args...)
			if got.code != exitUsage || !strings.Contains(got.stderr, tc.want) || got.stdout != "" {
				t.Errorf("Main(%q) = %d, stdout %q, stderr %q; want %d and stderr containing %q",
					tc.args, got.code, got.stdout, got.stderr, exitUsage, tc.want)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	platform := " " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + "\n"
	t.Run("set at link time", func(t *testing.T) {
		old := version
		version = "v1.2.3-test"
		t.Cleanup(func() { version = old })
		got := runMain(t.Context(), "", "version")
		want := result{code: exitOK, stdout: "calf v1.2.3-test" + platform}
		if diff := cmp.Diff(want, got, cmp.AllowUnexported(result{})); diff != "" {
			t.Errorf("calf version (-want +got):\n%s", diff)
		}
	})
	t.Run("from the build", func(t *testing.T) {
		got := runMain(t.Context(), "", "version")
		re := regexp.MustCompile(`^calf \S+` + regexp.QuoteMeta(platform) + `$`)
		if got.code != exitOK || !re.MatchString(got.stdout) {
			t.Errorf("calf version = %d, %q; want 0 and a match of %s", got.code, got.stdout, re)
		}
	})
}

func TestHelp(t *testing.T) {
	got := runMain(t.Context(), "", "run", "--help")
	if got.code != exitOK {
		t.Fatalf("calf run --help = %d, stderr %q", got.code, got.stderr)
	}
	for _, flag := range []string{"--model", "--store", "--broker", "--serve", "--system", "--session", "--timeout", "--max-turns", "--read", "--json", "--quiet"} {
		if !strings.Contains(got.stdout, flag) {
			t.Errorf("calf run --help does not mention %s:\n%s", flag, got.stdout)
		}
	}
	got = runMain(t.Context(), "", "worker", "--help")
	for _, flag := range []string{"--broker", "--store", "--agent", "--model", "--system", "--read", "--concurrency", "--max-attempts", "--drain", "--quiet"} {
		if got.code != exitOK || !strings.Contains(got.stdout, flag) {
			t.Errorf("calf worker --help = %d, does not mention %s:\n%s", got.code, flag, got.stdout)
		}
	}
	got = runMain(t.Context(), "", "deadletters", "--help")
	for _, sub := range []string{"list", "show", "replay", "--store"} {
		if got.code != exitOK || !strings.Contains(got.stdout, sub) {
			t.Errorf("calf deadletters --help = %d, does not mention %s:\n%s", got.code, sub, got.stdout)
		}
	}
}
