package commandhook

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/internal/proc"
)

// maxOutput bounds what a command hook may print.
const maxOutput = 1 << 20

// maxStderr bounds what of a command's standard error is kept.
const maxStderr = 4 << 10

// New returns a hook named name that runs at event, for the tools (or
// agents) that matcher selects (see [agent.Hook]), by running argv[0]
// with the arguments argv[1:], not through a shell. The program gets the
// [agent.HookInput] as JSON on its standard input and answers with an
// [agent.HookDecision] as JSON on its standard output ({"action": "deny",
// "reason": "..."}, or "ask" to send a call to approval); empty output
// allows. A program that exits with a non-zero status, prints something
// else, or outlasts timeout (the hook's [agent.Hook.Timeout]: zero means
// the agent's default for hooks) denies; it is killed then, with the
// processes it started. Its standard error is kept, up to a limit, in the
// denial's reason. Its environment is the worker's.
//
// The error, matching [agent.ErrInvalidAgent], says that argv names no
// program.
func New(name string, event agent.HookEvent, matcher string, argv []string, timeout time.Duration) (agent.Hook, error) {
	if len(argv) == 0 || argv[0] == "" {
		return agent.Hook{}, fmt.Errorf("%w: hook %s: no command", agent.ErrInvalidAgent, name)
	}
	argv = slices.Clone(argv)
	run := func(ctx context.Context, in agent.HookInput) (agent.HookDecision, error) {
		input, err := json.Marshal(in)
		if err != nil {
			return agent.HookDecision{}, err
		}
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Stdin = bytes.NewReader(input)
		var stdout, stderr limitedBuffer
		stdout.max, stderr.max = maxOutput, maxStderr
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		proc.Group(cmd)
		cmd.Cancel = func() error { return proc.Kill(cmd) }
		cmd.WaitDelay = time.Second
		err = cmd.Run()
		_ = proc.Kill(cmd) // whatever it left behind
		if ctx.Err() != nil {
			return agent.HookDecision{}, ctx.Err()
		}
		if err != nil {
			msg := strings.TrimSpace(stderr.buf.String())
			if msg == "" {
				return agent.HookDecision{}, fmt.Errorf("%s: %v", argv[0], err)
			}
			return agent.HookDecision{}, fmt.Errorf("%s: %v: %s", argv[0], err, msg)
		}
		if stdout.over {
			return agent.HookDecision{}, fmt.Errorf("%s printed more than %d bytes", argv[0], maxOutput)
		}
		out := bytes.TrimSpace(stdout.buf.Bytes())
		if len(out) == 0 {
			return agent.HookDecision{Action: agent.HookAllow}, nil
		}
		var d agent.HookDecision
		dec := json.NewDecoder(bytes.NewReader(out))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&d); err != nil {
			return agent.HookDecision{}, fmt.Errorf("%s printed no decision: %v", argv[0], err)
		}
		return d, nil
	}
	return agent.Hook{Name: name, Event: event, Matcher: matcher, Func: run, Timeout: timeout}, nil
}

// limitedBuffer keeps up to max bytes and notes whether more came. It is
// an io.Writer only: a buffer with a ReadFrom method would be filled by
// os/exec's copy without the limit.
type limitedBuffer struct {
	buf  bytes.Buffer
	max  int
	over bool
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.buf.Len(); room < len(p) {
		b.over = true
		b.buf.Write(p[:max(room, 0)])
		return len(p), nil
	}
	return b.buf.Write(p)
}
