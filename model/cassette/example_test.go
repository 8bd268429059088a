package cassette_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/cassette"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/model/openai"
)

// A cassette records an exchange with a server once, then answers the
// same request from its file with the server gone. In a test, the mode
// comes from CALF_RECORD and [cassette.ForTest] does the opening and
// closing.
func Example() {
	dir, _ := os.MkdirTemp("", "cassette")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "hello.httprr")

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "hello from the server")
	}))
	post := func(c *http.Client, url string) {
		req, _ := http.NewRequest("POST", url+"/v1/hello", strings.NewReader(`{"name": "calf"}`))
		req.Header.Set("Authorization", "Bearer sk-secret")
		resp, err := c.Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		fmt.Println(resp.StatusCode, string(body))
	}

	rec, _ := cassette.Open(path, &cassette.Options{Mode: cassette.Record})
	post(rec.Client(), srv.URL)
	if err := rec.Close(); err != nil { // writes the file
		fmt.Println(err)
		return
	}
	srv.Close()

	data, _ := os.ReadFile(path)
	fmt.Println("secret in the file:", strings.Contains(string(data), "sk-secret"))

	rep, err := cassette.Open(path, &cassette.Options{Mode: cassette.Replay})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rep.Close()
	post(rep.Client(), "http://api.example") // JSON bodies match decoded; the host is not compared
	// Output:
	// 200 hello from the server
	// secret in the file: false
	// 200 hello from the server
}

// A model adapter given a cassette's client: a streamed completion is
// recorded from a server, then replayed from the file alone.
func Example_model() {
	dir, _ := os.MkdirTemp("", "cassette")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "story.httprr")

	srv := modeltest.NewServer(func(ctx context.Context, req *model.Request) (*model.Response, error) {
		return modeltest.Text("Once upon a time"), nil
	})
	story := func(c *cassette.Cassette) {
		m, err := openai.New(openai.Options{Model: "llama3.2", BaseURL: srv.URL(), HTTPClient: c.Client()})
		if err != nil {
			fmt.Println(err)
			return
		}
		req := &model.Request{Messages: []model.Message{model.UserMessage("Tell me a story.")}}
		var deltas []string
		for chunk, err := range m.GenerateStream(context.Background(), req) {
			if err != nil {
				fmt.Println(err)
				return
			}
			if chunk.Delta != nil && chunk.Delta.Text != "" {
				deltas = append(deltas, chunk.Delta.Text)
			}
		}
		fmt.Printf("%s: %q\n", c.Mode(), deltas)
	}

	rec, _ := cassette.Open(path, &cassette.Options{Mode: cassette.Record})
	story(rec)
	if err := rec.Close(); err != nil {
		fmt.Println(err)
		return
	}
	srv.Close()

	rep, err := cassette.Open(path, &cassette.Options{Mode: cassette.Replay})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rep.Close()
	story(rep)
	// Output:
	// record: ["Once" " upon" " a" " time"]
	// replay: ["Once" " upon" " a" " time"]
}
