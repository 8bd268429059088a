package approval_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/agent/approval"
	"github.com/calf-go/calf/agent/session"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/store"
	storemem "github.com/calf-go/calf/store/memory"
	"github.com/calf-go/calf/tool"
)

// storedRecord is a record of testdata/records: kind, id and data as an
// earlier version wrote them; see testdata/records/README.md.
type storedRecord struct {
	Kind string          `json:"kind"`
	ID   string          `json:"id"`
	Data json.RawMessage `json:"data"`
}

// storedStore is a memory store holding the records of the fixture name.
func storedStore(t *testing.T, name string) store.Store {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "records", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var recs []storedRecord
	if err := json.Unmarshal(data, &recs); err != nil {
		t.Fatal(err)
	}
	s := storemem.New()
	for _, r := range recs {
		if _, err := s.Put(t.Context(), r.Kind, r.ID, r.Data, 0); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

type storedArgs struct {
	Text string `json:"text"`
}

// Approval requests stored by an earlier version are read by this one in
// each state, and acted on: the pending one answered (its run then ends,
// the tool allowed for its session), the one past its expiry denied by
// Expire (its run then ends with the denial), and answers to the others
// refused for the reason each stands.
func TestStoredRecords(t *testing.T) {
	ctx := t.Context()
	s := storedStore(t, "approvals")
	get := func(id string) *approval.Approval {
		t.Helper()
		a, err := approval.Get(ctx, s, id)
		if err != nil {
			t.Fatalf("Get(%s): %v", id, err)
		}
		return a
	}
	common := func(a *approval.Approval, run, prompt string) {
		t.Helper()
		args := `{"text":"` + prompt + `"}`
		if a.ID != approval.ID(run, "c1") || a.Agent != "guarded" || a.RunID != run || a.CorrelationID != run || a.Step != 1 ||
			a.ToolCallID != "c1" || a.ToolName != "echo" || a.ToolKind != tool.KindExecute || compactJSON(t, a.Arguments) != args ||
			a.Digest != approval.Digest("echo", []byte(args)) || a.Reason != "permission mode ask asks before execute tools" || a.RequestedAt.IsZero() {
			t.Errorf("%s: %+v", run, a)
		}
	}

	approved := get("run-approved/c1")
	common(approved, "run-approved", "approve me")
	if approved.Status != approval.Approved || approved.SessionID != "s1" || approved.Message != "fine, edited" ||
		compactJSON(t, approved.ApprovedArguments) != `{"text":"edited"}` || !approved.ForSession ||
		!approved.ExpiresAt.Equal(approved.RequestedAt.Add(time.Hour)) || approved.AnsweredAt.Before(approved.RequestedAt) {
		t.Errorf("the approved request: %+v", approved)
	}
	denied := get("run-denied/c1")
	common(denied, "run-denied", "deny me")
	if denied.Status != approval.Denied || denied.Message != "not now" || denied.AnsweredAt.IsZero() || !denied.ExpiresAt.IsZero() || denied.ForSession {
		t.Errorf("the denied request: %+v", denied)
	}
	expired := get("run-expired/c1")
	common(expired, "run-expired", "expire me")
	if expired.Status != approval.Denied || expired.Message != "no one answered the approval request in time" ||
		expired.ExpiresAt.IsZero() || expired.AnsweredAt.Before(expired.ExpiresAt) {
		t.Errorf("the expired request: %+v", expired)
	}
	cancelled := get("run-cancelled/c1")
	common(cancelled, "run-cancelled", "cancel me")
	if cancelled.Status != approval.Cancelled || !strings.Contains(cancelled.Message, "for the fixture") {
		t.Errorf("the request of the cancelled run: %+v", cancelled)
	}
	waiting := get("run-waiting/c1")
	common(waiting, "run-waiting", "wait for me")
	if waiting.Status != approval.Pending || waiting.SessionID != "s2" || !waiting.ExpiresAt.IsZero() || !waiting.AnsweredAt.IsZero() {
		t.Errorf("the pending request: %+v", waiting)
	}
	expiring := get("run-expiring/c1")
	common(expiring, "run-expiring", "expire later")
	if expiring.Status != approval.Pending || !expiring.ExpiresAt.Equal(expiring.RequestedAt.Add(time.Hour)) {
		t.Errorf("the pending request with an expiry: %+v", expiring)
	}

	ids := func(as []approval.Approval) string {
		var out []string
		for _, a := range as {
			out = append(out, a.RunID)
		}
		return strings.Join(out, " ")
	}
	for status, want := range map[approval.Status]string{
		"":                 "run-approved run-cancelled run-denied run-expired run-expiring run-waiting",
		approval.Pending:   "run-expiring run-waiting",
		approval.Denied:    "run-denied run-expired",
		approval.Approved:  "run-approved",
		approval.Cancelled: "run-cancelled",
	} {
		if got, err := approval.List(ctx, s, "", status); err != nil || ids(got) != want {
			t.Errorf("List(%q) = %q, %v; want %q", status, ids(got), err, want)
		}
	}
	if got, err := approval.List(ctx, s, "run-waiting", ""); err != nil || ids(got) != "run-waiting" {
		t.Errorf("List(run-waiting) = %q, %v", ids(got), err)
	}

	// The agent that asked, served here, carries out what is decided now.
	b := memory.New(nil)
	c := calf.NewClient(b, nil)
	t.Cleanup(func() { c.Close() })
	rt := agent.NewRuntime(c, s, nil)
	echo := tool.Must(tool.New("echo", "Echo.", func(_ context.Context, in storedArgs) (string, error) { return "echo:" + in.Text, nil }))
	guarded := agent.Must(agent.New("guarded", modeltest.FunctionModel(func(_ context.Context, req *model.Request) (*model.Response, error) {
		return modeltest.Text("saw: " + req.Messages[len(req.Messages)-1].Text()), nil
	}), &agent.Options{Tools: []tool.Tool{echo}, Permissions: &agent.Permissions{Mode: agent.PermissionAsk}}))
	if err := guarded.Serve(ctx, rt, nil); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()

	// Refused: answered, expired or of an ended run, or for other arguments.
	if _, err := approval.Respond(ctx, s, c, approved.ID, approval.Answer{Approve: true, Digest: approved.Digest}); !errors.Is(err, approval.ErrAnswered) {
		t.Errorf("an answer to the approved request: %v", err)
	}
	if _, err := approval.Respond(ctx, s, c, expired.ID, approval.Answer{Approve: true, Digest: expired.Digest}); !errors.Is(err, approval.ErrExpired) {
		t.Errorf("an answer to the expired request: %v", err)
	}
	if _, err := approval.Respond(ctx, s, c, cancelled.ID, approval.Answer{Approve: true, Digest: cancelled.Digest}); !errors.Is(err, approval.ErrRunEnded) {
		t.Errorf("an answer to the cancelled run's request: %v", err)
	}
	if _, err := approval.Respond(ctx, s, c, waiting.ID, approval.Answer{Approve: true, Digest: approval.Digest("echo", []byte(`{"text":"other"}`))}); !errors.Is(err, approval.ErrMismatch) {
		t.Errorf("an answer for other arguments: %v", err)
	}

	// The pending one approved for its session: its run ends.
	answered, err := approval.Respond(ctx, s, c, waiting.ID, approval.Answer{Approve: true, ForSession: true, Digest: waiting.Digest})
	if err != nil || answered.Status != approval.Approved || !answered.ForSession || answered.AnsweredAt.IsZero() {
		t.Fatalf("Respond(run-waiting) = %+v, %v", answered, err)
	}
	if out, err := guarded.Wait(wctx, rt, "run-waiting"); err != nil || out.Output != "saw: echo:wait for me" {
		t.Errorf("run-waiting after the answer: %+v, %v", out, err)
	}
	if sess, err := session.Load(ctx, s, "s2"); err != nil || len(sess.AllowedTools) != 1 || sess.AllowedTools[0] != "echo" {
		t.Errorf("session s2 after an answer for the session: %+v, %v", sess, err)
	}

	// The one with an expiry, once it has passed, is denied: its run ends.
	later := calf.NewClient(b, &calf.Options{Now: func() time.Time { return expiring.ExpiresAt.Add(time.Minute) }})
	t.Cleanup(func() { later.Close() })
	if n, err := approval.Expire(ctx, s, later); err != nil || n != 1 {
		t.Fatalf("Expire = %d, %v; want the stored request past its expiry denied", n, err)
	}
	if a := get(expiring.ID); a.Status != approval.Denied || a.Message != "no one answered the approval request in time" {
		t.Errorf("the request after Expire: %+v", a)
	}
	out, err := guarded.Wait(wctx, rt, "run-expiring")
	if err != nil || !strings.HasPrefix(out.Output, "saw: the call was denied") || !strings.Contains(out.Output, "in time") {
		t.Errorf("run-expiring after the expiry: %+v, %v", out, err)
	}
	if pending, err := approval.List(ctx, s, "", approval.Pending); err != nil || len(pending) != 0 {
		t.Errorf("pending requests left: %q, %v", ids(pending), err)
	}
}

// compactJSON returns data compacted: the fixtures hold their records'
// JSON indented.
func compactJSON(t *testing.T, data []byte) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, data); err != nil {
		t.Fatalf("%s: %v", data, err)
	}
	return b.String()
}
