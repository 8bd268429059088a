// Command digest runs an agent on a schedule: every -every (or at the
// times of -cron, in -tz), a run of the digest agent starts with the task
// as its prompt, and its answer is printed; after -times runs it stops.
// The schedule and its next firing are records in the store (SQLite in
// -dir), not a goroutine: stopped and started again, the program goes on
// from the schedule it finds there.
//
//	OPENAI_API_KEY=... go run ./examples/digest -every 30s -times 3 "Write a one-line status of the day so far"
//	OPENAI_API_KEY=... go run ./examples/digest -cron "0 9 * * 1-5" -tz Europe/Paris "Summarize yesterday"
//
// Any OpenAI-compatible server works: set OPENAI_BASE_URL and pass
// -model; other providers by name (-model anthropic:claude-haiku-4-5).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/examples/internal/excli"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/schedule"
	"github.com/calf-go/calf/store/sqlite"
)

// config is the schedule the command line asks for.
type config struct {
	every    time.Duration
	cron, tz string
	times    int
	dir      string
}

func main() {
	var c config
	flag.DurationVar(&c.every, "every", 0, "run every D (such as 30s or 1h)")
	flag.StringVar(&c.cron, "cron", "", `run at the times of a cron expression ("0 9 * * 1-5", @daily)`)
	flag.StringVar(&c.tz, "tz", "", "the IANA time zone of -cron (default UTC)")
	flag.IntVar(&c.times, "times", 3, "stop after this many runs")
	flag.StringVar(&c.dir, "dir", os.TempDir(), "the directory of the store (digest.db)")
	excli.Main("digest", "Write a one-line status of the day so far.", func(ctx context.Context, m model.Model, task string) (string, error) {
		if c.every == 0 && c.cron == "" {
			c.every = 30 * time.Second
		}
		return run(ctx, m, task, c, os.Stdout)
	})
}

// run schedules the digest agent with task as its prompt and prints the
// answer of each scheduled run to w, until c.times runs have answered.
func run(ctx context.Context, m model.Model, task string, c config, w io.Writer) (string, error) {
	st, err := sqlite.Open(filepath.Join(c.dir, "digest.db"), nil)
	if err != nil {
		return "", err
	}
	defer st.Close()
	b := memory.New(nil)
	defer b.Close()
	client := calf.NewClient(b, nil)
	defer client.Close()
	rt := agent.NewRuntime(client, st, nil)

	digest, err := agent.New("digest", m, &agent.Options{Instructions: "You write short digests: a few lines, plain text."})
	if err != nil {
		return "", err
	}
	if err := digest.Serve(ctx, rt, nil); err != nil {
		return "", err
	}
	// The answers of the scheduled runs, as they come.
	answers := make(chan *calf.Message, 16)
	if err := client.Handle(ctx, agent.OutputChannel("digest"), func(_ context.Context, msg *calf.Message) error {
		answers <- msg
		return nil
	}, nil); err != nil {
		return "", err
	}
	sched := schedule.New(rt, nil)
	if err := sched.Serve(ctx); err != nil {
		return "", err
	}
	spec := schedule.Spec{Name: "digest", Kind: "agent", Runner: "digest", Prompt: task, Every: c.every, Cron: c.cron, TimeZone: c.tz}
	sc, err := sched.Add(ctx, spec)
	if errors.Is(err, schedule.ErrExists) {
		// Started before: the schedule in the store goes on, with this
		// command line's spec.
		if err := sched.Delete(ctx, spec.Name); err != nil {
			return "", err
		}
		sc, err = sched.Add(ctx, spec)
	}
	if err != nil {
		return "", err
	}
	fmt.Fprintf(w, "scheduled: the first run at %s\n", sc.Next.Local().Format(time.Kitchen))
	for n := 0; n < c.times; {
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case msg := <-answers:
			var out agent.OutputEvent
			if err := msg.Decode(&out); err != nil {
				return "", err
			}
			if !strings.HasPrefix(out.RunID, "sched-digest-") {
				continue
			}
			n++
			fmt.Fprintf(w, "%s %s\n", time.Now().Format(time.Kitchen), out.Text())
		}
	}
	return fmt.Sprintf("%d digests; the schedule stays in %s", c.times, filepath.Join(c.dir, "digest.db")), nil
}
