package session_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/agent/session"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/internal/testwait"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/model/modeltest"
	"github.com/calf-go/calf/store"
)

// Messages appended to a session without a run are kept, on every store,
// and the session's next run starts from them; bad messages, an unknown
// session and a session with a run in progress are refused and change
// nothing; appends made at once all land.
func TestAppendToSession(t *testing.T) {
	for name, open := range sessionStores() {
		t.Run(name, func(t *testing.T) {
			s := open(t)
			mb := memory.New(nil)
			c := calf.NewClient(mb, nil)
			t.Cleanup(func() {
				_ = c.Close()
				_ = mb.Close()
			})
			rt := agent.NewRuntime(c, s, nil)
			var mu sync.Mutex
			var seen [][]model.Message
			hold := make(chan struct{}) // closed: the model answers at once
			close(hold)
			a := agent.Must(agent.New("chat", modeltest.FunctionModel(func(ctx context.Context, req *model.Request) (*model.Response, error) {
				mu.Lock()
				seen = append(seen, model.CloneMessages(req.Messages))
				h := hold
				mu.Unlock()
				select {
				case <-h:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
				return modeltest.Text(fmt.Sprint("reply ", len(req.Messages))), nil
			}), nil))
			if err := a.Serve(t.Context(), rt, nil); err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()
			if _, err := a.Run(runCtx(t), rt, "I am Ada.", &agent.RunOptions{SessionID: "s1"}); err != nil {
				t.Fatal(err)
			}

			// Unknown session, no messages, and messages that make no
			// conversation: refused, nothing stored.
			if err := session.Append(ctx, rt.Store(), "nope", model.UserMessage("hello")); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("append to an unknown session: %v", err)
			}
			if err := session.Append(ctx, rt.Store(), "s1"); err == nil {
				t.Error("an append of no messages was taken")
			}
			orphan := model.Message{Role: model.RoleTool, ToolCallID: "c1", Parts: []model.Part{model.TextPart("42")}}
			if err := session.Append(ctx, rt.Store(), "s1", orphan); err == nil || !strings.Contains(err.Error(), "tool result") {
				t.Errorf("append of a lone tool result: %v", err)
			}
			if info, err := session.LoadInfo(ctx, rt.Store(), "s1"); err != nil || info.Messages != 2 {
				t.Fatalf("after the refusals: %+v, %v", info, err)
			}

			// An append: the next run sees it after the first exchange.
			note := []model.Message{model.UserMessage("Remember: the code is 42."), model.AssistantMessage("Noted.")}
			if err := session.Append(ctx, rt.Store(), "s1", note...); err != nil {
				t.Fatal(err)
			}
			out, err := a.Run(runCtx(t), rt, "What is the code?", &agent.RunOptions{SessionID: "s1"})
			if err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			last := seen[len(seen)-1]
			mu.Unlock()
			var texts []string
			for _, m := range last {
				if m.Role != model.RoleSystem {
					texts = append(texts, string(m.Role)+":"+m.Text())
				}
			}
			want := "user:I am Ada.|assistant:reply 1|user:Remember: the code is 42.|assistant:Noted.|user:What is the code?"
			if got := strings.Join(texts, "|"); got != want {
				t.Errorf("the next run's model saw\n%s\nwant\n%s", got, want)
			}
			if out.Output != "reply 5" {
				t.Errorf("output %q", out.Output)
			}
			sess, err := session.Load(ctx, rt.Store(), "s1")
			if err != nil || len(sess.Messages) != 6 || sess.Messages[3].Text() != "Noted." {
				t.Fatalf("session after the run: %+v, %v", sess, err)
			}

			// A run in progress: refused, then taken once it ended.
			mu.Lock()
			hold = make(chan struct{})
			release := hold
			mu.Unlock()
			done := make(chan error, 1)
			go func() {
				_, err := a.Run(runCtx(t), rt, "Wait for me.", &agent.RunOptions{SessionID: "s1"})
				done <- err
			}()
			testwait.ForErr(t, 10*time.Second, "the run to start", func() error {
				info, err := session.LoadInfo(ctx, rt.Store(), "s1")
				if err == nil && info.Status != session.Running {
					err = fmt.Errorf("session status %v", info.Status)
				}
				return err
			})
			if err := session.Append(ctx, rt.Store(), "s1", model.UserMessage("too early")); !errors.Is(err, session.ErrBusy) {
				t.Errorf("append while a run is in progress: %v", err)
			}
			close(release)
			if err := <-done; err != nil {
				t.Fatal(err)
			}

			// Appends at once all land, each whole.
			var wg sync.WaitGroup
			errs := make(chan error, 6)
			for i := range 6 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs <- session.Append(ctx, rt.Store(), "s1", model.UserMessage(fmt.Sprint("note ", i)), model.AssistantMessage(fmt.Sprint("ok ", i)))
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			sess, err = session.Load(ctx, rt.Store(), "s1")
			if err != nil {
				t.Fatal(err)
			}
			if len(sess.Messages) != 8+12 {
				t.Fatalf("%d messages after the concurrent appends, want 20", len(sess.Messages))
			}
			for i := 8; i < 20; i += 2 {
				u, r := sess.Messages[i].Text(), sess.Messages[i+1].Text()
				if strings.TrimPrefix(u, "note ") != strings.TrimPrefix(r, "ok ") {
					t.Errorf("messages %d and %d: %q, %q: an append was split", i, i+1, u, r)
				}
			}
			// No part of a refused append is left behind.
			parts, err := s.List(ctx, "session_messages", "", "", 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(parts) != 3+7 {
				t.Errorf("%d parts stored, want 10 (3 runs, 7 appends)", len(parts))
			}
		})
	}
}
