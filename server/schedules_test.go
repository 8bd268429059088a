package server_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/calf-go/calf/internal/testwait"
	"github.com/calf-go/calf/runner"
	"github.com/calf-go/calf/server"
)

// scheduleJSON is what the schedule endpoints answer, in part.
type scheduleJSON struct {
	Name    string    `json:"name"`
	Kind    string    `json:"kind"`
	Runner  string    `json:"runner"`
	Every   string    `json:"every"`
	Cron    string    `json:"cron"`
	Paused  bool      `json:"paused"`
	Next    time.Time `json:"next"`
	History []struct {
		At      time.Time `json:"at"`
		RunID   string    `json:"run_id"`
		Skipped string    `json:"skipped"`
		Trigger bool      `json:"trigger"`
	} `json:"history"`
}

func decode[T any](t *testing.T, body string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("the answer %s: %v", body, err)
	}
	return v
}

// waitRun waits until the run id, as GET /v1/runs/{id} (with token)
// tells it, has completed.
func waitRun(t *testing.T, base, token, id string) {
	t.Helper()
	testwait.For(t, 20*time.Second, "run "+id+" complete", func() bool {
		code, body, _ := do(t, "GET", base+"/v1/runs/"+id, token, "", nil)
		return code == 200 && decode[runner.RunSummary](t, body).Status == "complete"
	})
}

// The schedules API on a server without tokens: a bad spec is 400 with
// what is wrong, a name taken 409, an unknown schedule 404; a schedule
// created over HTTP fires on its own and its firing's run completes; it
// is paused, resumed, triggered while paused (its run completes too) and
// deleted.
func TestSchedulesAPI(t *testing.T) {
	hs, _, _ := newServer(t, &server.Options{RateLimit: -1})
	u := hs.URL
	if code, body, _ := do(t, "GET", u+"/v1/schedules", "", "", nil); code != 200 || !strings.Contains(body, `"schedules":[]`) {
		t.Errorf("no schedules: %d %s", code, body)
	}
	for _, c := range []struct{ body, want string }{
		{`not json`, "not a schedule's spec"},
		{`{"name":"x","runner":"echo","every":"1m","colour":"red"}`, `unknown field \"colour\"`},
		{`{"name":"x","runner":"echo"}`, "give cron or every"},
		{`{"name":"x","runner":"echo","every":"often"}`, `every \"often\"`},
		{`{"name":"x","runner":"echo","every":"10ms"}`, "at least 1s"},
		{`{"name":"x","runner":"nope","every":"1m"}`, `runner \"nope\"`},
		{`{"name":"x","kind":"team","runner":"echo","every":"1m"}`, "echo is a agent, not a team"},
		{`{"name":"bad name","runner":"echo","every":"1m"}`, "name"},
		{`{"name":"x","runner":"echo","cron":"61 * * * *"}`, "cron"},
		{`{"name":"x","runner":"echo","cron":"0 0 30 2 *"}`, "never fires"},
		{`{"name":"x","runner":"echo","cron":"@daily","time_zone":"Mars/Olympus"}`, "time_zone"},
	} {
		code, body, _ := do(t, "POST", u+"/v1/schedules", "", c.body, nil)
		if code != 400 || !strings.Contains(body, c.want) || !strings.Contains(body, "invalid_request") {
			t.Errorf("POST %s: %d %s, want 400 with %q", c.body, code, body, c.want)
		}
	}

	code, body, h := do(t, "POST", u+"/v1/schedules", "", `{"name":"tick","runner":"echo","prompt":"say tick","every":"1s"}`, nil)
	if code != http.StatusCreated || h.Get("Location") != "/v1/schedules/tick" {
		t.Fatalf("create: %d %s (Location %q)", code, body, h.Get("Location"))
	}
	if sc := decode[scheduleJSON](t, body); sc.Kind != "agent" || sc.Runner != "echo" || sc.Every != "1s" || sc.Paused || sc.Next.IsZero() {
		t.Errorf("created %+v", sc)
	}
	if code, body, _ := do(t, "POST", u+"/v1/schedules", "", `{"name":"tick","runner":"echo","cron":"@hourly"}`, nil); code != 409 || !strings.Contains(body, "exists") {
		t.Errorf("the name again: %d %s", code, body)
	}

	// It fires by itself: its firing's run completes.
	var run string
	testwait.For(t, 20*time.Second, "a firing of tick", func() bool {
		_, body, _ := do(t, "GET", u+"/v1/schedules/tick", "", "", nil)
		for _, f := range decode[scheduleJSON](t, body).History {
			if f.RunID != "" {
				run = f.RunID
				return true
			}
		}
		return false
	})
	waitRun(t, u, "", run)

	code, body, _ = do(t, "POST", u+"/v1/schedules/tick/pause", "", "", nil)
	if sc := decode[scheduleJSON](t, body); code != 200 || !sc.Paused || !sc.Next.IsZero() {
		t.Errorf("pause: %d %s", code, body)
	}
	code, body, _ = do(t, "GET", u+"/v1/schedules", "", "", nil)
	list := decode[struct{ Schedules []scheduleJSON }](t, body)
	if code != 200 || len(list.Schedules) != 1 || !list.Schedules[0].Paused || len(list.Schedules[0].History) == 0 {
		t.Errorf("list: %d %s", code, body)
	}
	code, body, _ = do(t, "POST", u+"/v1/schedules/tick/trigger", "", "", nil)
	trig := decode[struct {
		Schedule string `json:"schedule"`
		RunID    string `json:"run_id"`
	}](t, body)
	if code != http.StatusAccepted || trig.Schedule != "tick" || !strings.HasSuffix(trig.RunID, "-trigger") {
		t.Fatalf("trigger: %d %s", code, body)
	}
	waitRun(t, u, "", trig.RunID)
	code, body, _ = do(t, "POST", u+"/v1/schedules/tick/resume", "", "", nil)
	if sc := decode[scheduleJSON](t, body); code != 200 || sc.Paused || sc.Next.IsZero() {
		t.Errorf("resume: %d %s", code, body)
	}

	for _, c := range []struct{ method, path string }{
		{"GET", "/v1/schedules/nope"}, {"POST", "/v1/schedules/nope/pause"}, {"POST", "/v1/schedules/nope/resume"},
		{"POST", "/v1/schedules/nope/trigger"}, {"DELETE", "/v1/schedules/nope"},
	} {
		if code, body, _ := do(t, c.method, u+c.path, "", "", nil); code != 404 || !strings.Contains(body, "not_found") {
			t.Errorf("%s %s: %d %s", c.method, c.path, code, body)
		}
	}
	if code, body, h := do(t, "PUT", u+"/v1/schedules", "", "", nil); code != 405 || h.Get("Allow") != "GET, POST" {
		t.Errorf("PUT /v1/schedules: %d %s", code, body)
	}

	if code, body, _ := do(t, "DELETE", u+"/v1/schedules/tick", "", "", nil); code != 200 || !strings.Contains(body, `"deleted":true`) {
		t.Errorf("delete: %d %s", code, body)
	}
	if code, body, _ := do(t, "GET", u+"/v1/schedules/tick", "", "", nil); code != 404 {
		t.Errorf("deleted, GET: %d %s", code, body)
	}
	if code, body, _ := do(t, "DELETE", u+"/v1/schedules/tick", "", "", nil); code != 404 {
		t.Errorf("deleted, DELETE: %d %s", code, body)
	}
}

// With tokens, a schedule is its creator's: another user neither lists,
// reads, controls nor deletes it (404), and cannot take its name (409);
// the runs it starts are its creator's to read. A request without a
// token is 401, before its body is read.
func TestSchedulesOwners(t *testing.T) {
	hs, _, _ := newServer(t, &server.Options{Tokens: map[string]string{"tok-ann": "ann", "tok-bob": "bob"}, RateLimit: -1})
	u := hs.URL
	for _, c := range []struct{ method, path string }{
		{"GET", "/v1/schedules"}, {"GET", "/v1/schedules/daily"}, {"POST", "/v1/schedules/daily/pause"},
		{"DELETE", "/v1/schedules/daily"},
	} {
		if code, body, h := do(t, c.method, u+c.path, "", "", nil); code != 401 || h.Get("WWW-Authenticate") == "" {
			t.Errorf("%s %s without a token: %d %s", c.method, c.path, code, body)
		}
	}
	c := rawRequest(t, u, "/v1/schedules", "")
	if resp, body := answer(t, c); resp.StatusCode != 401 || !strings.Contains(body, "invalid_api_key") {
		t.Errorf("POST /v1/schedules without a token, its body never sent: %s %s", resp.Status, body)
	}

	if code, body, _ := do(t, "POST", u+"/v1/schedules", "tok-ann", `{"name":"daily","runner":"echo","prompt":"good morning","cron":"0 9 * * *","time_zone":"Europe/Paris"}`, nil); code != 201 {
		t.Fatalf("ann creates: %d %s", code, body)
	}
	if code, body, _ := do(t, "POST", u+"/v1/schedules", "tok-bob", `{"name":"daily","runner":"echo","every":"1h"}`, nil); code != 409 {
		t.Errorf("bob takes ann's name: %d %s", code, body)
	}
	if _, body, _ := do(t, "GET", u+"/v1/schedules", "tok-bob", "", nil); !strings.Contains(body, `"schedules":[]`) {
		t.Errorf("bob's list: %s", body)
	}
	for _, c := range []struct{ method, path string }{
		{"GET", "/v1/schedules/daily"}, {"POST", "/v1/schedules/daily/pause"}, {"POST", "/v1/schedules/daily/resume"},
		{"POST", "/v1/schedules/daily/trigger"}, {"DELETE", "/v1/schedules/daily"},
	} {
		if code, body, _ := do(t, c.method, u+c.path, "tok-bob", "", nil); code != 404 {
			t.Errorf("bob: %s %s: %d %s", c.method, c.path, code, body)
		}
	}
	code, body, _ := do(t, "GET", u+"/v1/schedules", "tok-ann", "", nil)
	if list := decode[struct{ Schedules []scheduleJSON }](t, body); code != 200 || len(list.Schedules) != 1 || list.Schedules[0].Cron != "0 9 * * *" {
		t.Errorf("ann's list: %d %s", code, body)
	}

	code, body, _ = do(t, "POST", u+"/v1/schedules/daily/trigger", "tok-ann", "", nil)
	if code != 202 {
		t.Fatalf("ann triggers: %d %s", code, body)
	}
	run := decode[struct {
		RunID string `json:"run_id"`
	}](t, body).RunID
	waitRun(t, u, "tok-ann", run)
	if code, body, _ := do(t, "GET", u+"/v1/runs/"+run, "tok-bob", "", nil); code != 404 {
		t.Errorf("bob reads ann's scheduled run: %d %s", code, body)
	}
	if _, body, _ := do(t, "GET", u+"/v1/runs", "tok-ann", "", nil); !strings.Contains(body, run) {
		t.Errorf("ann's runs do not list %s: %s", run, body)
	}
	if code, body, _ := do(t, "DELETE", u+"/v1/schedules/daily", "tok-ann", "", nil); code != 200 {
		t.Errorf("ann deletes: %d %s", code, body)
	}
	if code, body, _ := do(t, "POST", u+"/v1/schedules", "tok-bob", `{"name":"daily","runner":"echo","every":"1h"}`, nil); code != 201 {
		t.Errorf("bob takes the name, free again: %d %s", code, body)
	}
	if code, body, _ := do(t, "GET", u+"/v1/schedules/daily", "tok-ann", "", nil); code != 404 {
		t.Errorf("ann reads bob's schedule: %d %s", code, body)
	}
}
