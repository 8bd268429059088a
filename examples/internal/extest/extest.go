package extest

import (
	"net/http"
	"os"
	"sync/atomic"
	"testing"

	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/cassette"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/model/openai"
)

// ModelName is the model every example's cassette asks for. A recording
// against a real provider must use it too, for the replayed requests to
// match.
const ModelName = "gpt-4o-mini"

// replayURL is the base URL of replayed requests. A cassette does not
// compare hosts, only paths, so it stands for any server whose API is at
// /v1.
const replayURL = "https://api.openai.com/v1"

// Model returns a model/openai chat completions model named [ModelName]
// whose HTTP traffic goes through the cassette file at path; the cassette
// is closed, and written when recording, when the test ends.
//
// Replaying (the default), answers come from the file and a request that
// differs from the recorded ones fails at once with a
// [*cassette.MismatchError] showing the difference, and the test fails
// unless every recorded exchange was asked for. Recording
// (CALF_RECORD=1), requests go to OpenAI's API, or OPENAI_BASE_URL, with
// OPENAI_API_KEY when that is set; without a key they go to a local
// [modeltest.Server] that answers with script, which is how the committed
// cassettes were made.
func Model(t testing.TB, path string, script modeltest.ServerHandler) model.Model {
	t.Helper()
	return ModelWith(t, path, script, nil)
}

// ModelWith is [Model] with the cassette's options, such as a Scrub that
// takes what changes from run to run (a duration, say) out of the
// requests before they are recorded and matched. Their Mode is not
// overridden.
func ModelWith(t testing.TB, path string, script modeltest.ServerHandler, copts *cassette.Options) model.Model {
	t.Helper()
	client := cassette.ForTest(t, path, copts)
	opts := openai.Options{Model: ModelName, HTTPClient: client}
	switch {
	case !cassette.Recording():
		// Replaying: no key, no retries (a mismatch is no outage).
		opts.APIKey, opts.BaseURL, opts.MaxRetries = "replayed", replayURL, -1
		recorded, err := cassette.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		c := &counter{next: client.Transport}
		opts.HTTPClient = &http.Client{Transport: c}
		t.Cleanup(func() {
			if n := c.n.Load(); n != int64(len(recorded)) && !t.Failed() {
				t.Errorf("%s: %d requests for %d recorded exchanges", path, n, len(recorded))
			}
		})
	case os.Getenv("OPENAI_API_KEY") != "":
		// Recording against a real provider: the environment's key and
		// base URL.
	default:
		s := modeltest.NewServer(script)
		t.Cleanup(s.Close)
		opts.BaseURL = s.URL()
	}
	m, err := openai.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// counter counts the requests that go through it.
type counter struct {
	next http.RoundTripper
	n    atomic.Int64
}

func (c *counter) RoundTrip(req *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.next.RoundTrip(req)
}
