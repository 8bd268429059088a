package main

import (
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/calf-go/calf/model/modeltest"
)

// lines passes what the program prints to the test, a write at a time.
type lines chan string

func (l lines) Write(p []byte) (int, error) { l <- string(p); return len(p), nil }

// The run drafts, waits for the webhook, and publishes once it is
// approved; a run nobody approves times out unpublished.
func TestWebhookApproves(t *testing.T) {
	for _, tc := range []struct {
		name    string
		approve bool
	}{{"approved", true}, {"timed out", false}} {
		t.Run(tc.name, func(t *testing.T) {
			m := modeltest.NewTestModel(modeltest.Text("- timers\n- schedules\n- signals"))
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			type result struct {
				r   Release
				err error
			}
			done := make(chan result, 1)
			out := make(lines, 4)
			go func() {
				r, err := run(t.Context(), m, "Calf 0.9", 500*time.Millisecond, ln, out)
				done <- result{r, err}
			}()
			var printed string
			select {
			case printed = <-out:
			case <-time.After(10 * time.Second):
				t.Fatal("the program printed no run id")
			}
			if tc.approve {
				run := strings.Fields(printed)[1]
				// No such run.
				resp, err := http.Post("http://"+ln.Addr().String()+"/hooks/approval/nope", "application/json", strings.NewReader(`{"approved":true}`))
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusNotFound {
					t.Errorf("an unknown run: %d", resp.StatusCode)
				}
				// A body that is not an approval is refused.
				resp, err = http.Post("http://"+ln.Addr().String()+"/hooks/approval/"+run, "application/json", strings.NewReader(`nope`))
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusBadRequest {
					t.Errorf("a bad body: %d", resp.StatusCode)
				}
				resp, err = http.Post("http://"+ln.Addr().String()+"/hooks/approval/"+run, "application/json", strings.NewReader(`{"approved":true,"by":"ada"}`))
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusAccepted {
					t.Fatalf("webhook: %d", resp.StatusCode)
				}
			}
			res := <-done
			if res.err != nil {
				t.Fatal(res.err)
			}
			if res.r.Published != tc.approve || res.r.Notes == "" || (tc.approve && res.r.By != "ada") {
				t.Errorf("final %+v", res.r)
			}
		})
	}
}
